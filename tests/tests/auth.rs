//! The service token: master and servers started with `--token-file` answer only requests
//! that carry it; a missing or wrong token gets UNAUTHENTICATED saying what to set, and
//! changes nothing. A master or server refuses a wider address than loopback without one.

use std::path::PathBuf;
use std::process::Command;

use angel_client::{MatrixSpec, PsClient, PsError};
use angel_tests::{
    Cluster, binary, client_as, expect, push_one, raw_server, repo, result_value, run_job, status,
    token_file,
};
use tonic::Code;

async fn client(addr: &str, token: Option<&str>) -> Result<std::sync::Arc<PsClient>, PsError> {
    client_as(addr, token, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_requests_with_the_service_token_are_answered_and_the_others_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, token) = token_file(dir.path());
    let flags = ["--token-file", path.to_str().unwrap()];
    // The servers register and heartbeat, and the master calls them, with the token.
    let cluster = Cluster::start_flags(2, &flags, &flags);
    let addr = &cluster.master.addr;

    let good = client(addr, Some(&token)).await.unwrap();
    good.create_matrix(MatrixSpec::sparse("m", 1, 1 << 40))
        .await
        .unwrap();
    let keys = [3u64, 1 << 39, (1 << 40) - 1];
    good.push_keys("m", 0, &keys, &[1.0f32, 2.0, 3.0])
        .await
        .unwrap();

    let missing = client(addr, None).await.unwrap_err();
    expect(
        missing,
        Code::Unauthenticated,
        &["requires a token", "ANGEL_TOKEN"],
    );
    let wrong = client(addr, Some(&"0".repeat(64))).await.unwrap_err();
    expect(wrong, Code::Unauthenticated, &["wrong token"]);

    // Straight to a server, past the master: refused before any handler runs.
    let matrix = good.describe("m").await.unwrap();
    for server in &cluster.servers {
        let push = push_one(matrix.meta.id, 3, 100.0);
        let refused = status(raw_server(&server.addr).await.push(push).await);
        expect(refused, Code::Unauthenticated, &["requires a token"]);
    }
    let values: Vec<f32> = good.pull_keys("m", 0, &keys).await.unwrap();
    assert_eq!(values, [1.0, 2.0, 3.0], "nothing changed");

    // The command line's clients read the token from their environment.
    let status = |env: Option<&PathBuf>| {
        let mut command = Command::new(binary());
        command
            .args(["status", "--master", addr, "--output", "json"])
            .env_remove("ANGEL_TOKEN")
            .env_remove("ANGEL_TOKEN_FILE");
        if let Some(path) = env {
            command.env("ANGEL_TOKEN_FILE", path);
        }
        command.output().unwrap()
    };
    let with = status(Some(&path));
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert!(
        String::from_utf8_lossy(&with.stdout).contains(r#""m""#),
        "status lists matrix m"
    );
    let without = status(None);
    assert!(!without.status.success());
    let said = String::from_utf8_lossy(&without.stderr);
    assert!(said.contains("ANGEL_TOKEN"), "{said}");
    assert!(!said.contains(&token) && !String::from_utf8_lossy(&with.stdout).contains(&token));
    // Or from --token-file, as a master or server takes it.
    let flagged = Command::new(binary())
        .args([
            "status",
            "--master",
            addr,
            "--output",
            "json",
            "--token-file",
        ])
        .arg(&path)
        .env_remove("ANGEL_TOKEN")
        .env_remove("ANGEL_TOKEN_FILE")
        .output()
        .unwrap();
    assert!(
        flagged.status.success(),
        "{}",
        String::from_utf8_lossy(&flagged.stderr)
    );
    let missing = Command::new(binary())
        .args(["status", "--master", addr, "--token-file", "no-such.token"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && said.contains("no-such.token"),
        "{said}"
    );
}

#[test]
fn a_master_or_server_on_a_wider_address_needs_a_token() {
    for args in [
        &["master", "--bind", "0.0.0.0:0"][..],
        &["server", "--master", "127.0.0.1:1", "--bind", "0.0.0.0:0"][..],
        &["standalone", "--bind", "0.0.0.0:0"][..],
    ] {
        let out = Command::new(binary())
            .args(args)
            .env_remove("ANGEL_TOKEN")
            .env_remove("ANGEL_TOKEN_FILE")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started without a token");
        let said = String::from_utf8_lossy(&out.stderr);
        for words in ["without a token", "angel-ps token", "--token-file"] {
            assert!(
                said.contains(words),
                "{args:?}: '{said}' should mention '{words}'"
            );
        }
    }
}

#[test]
fn a_job_against_a_service_with_a_token_trains_with_it_and_fails_clearly_without() {
    let dir = tempfile::tempdir().unwrap();
    let (path, token) = token_file(dir.path());
    let flags = ["--token-file", path.to_str().unwrap()];
    let cluster = Cluster::start_flags(1, &flags, &flags);
    let job = repo("examples/a9a/job.sql");
    let data = format!("data={}", repo("examples/data/a9a").display());
    let args = [
        job.to_str().unwrap(),
        "--master",
        cluster.master.addr.as_str(),
        "--var",
        &data,
    ];
    // The job's client reads ANGEL_TOKEN, as an executor's would.
    let (_, trained) = run_job(&args, &[("ANGEL_TOKEN".into(), token.clone())]);
    let stdout = String::from_utf8_lossy(&trained.stdout);
    assert!(
        trained.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&trained.stderr)
    );
    assert!(result_value(&stdout, "test_auc") > 0.85, "{stdout}");
    let (_, refused) = run_job(&args, &[]);
    assert!(!refused.status.success(), "a job without the token ran");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("requires a token"), "{said}");
    assert!(!said.contains(&token) && !stdout.contains(&token));
}
