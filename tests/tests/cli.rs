//! The `angel-ps` command: help texts, `status`, and clean shutdown on SIGTERM.

use std::process::Command;
use std::time::Duration;

use angel_client::MatrixSpec;
use angel_tests::{Cluster, Node, binary};

#[test]
fn every_subcommand_documents_its_flags() {
    for (sub, flags) in [
        ("master", &["--bind", "--parts-per-server"][..]),
        (
            "server",
            &[
                "--master",
                "--bind",
                "--advertise",
                "--max-message-bytes",
                "--heartbeat-ms",
            ],
        ),
        (
            "standalone",
            &["--servers", "--bind", "--max-message-bytes"],
        ),
        ("status", &["--master"]),
        ("demo", &["--servers", "--rounds", "--keys", "--seed"]),
    ] {
        let out = Command::new(binary())
            .args([sub, "--help"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{sub} --help failed");
        let text = String::from_utf8(out.stdout).unwrap();
        for flag in flags {
            assert!(
                text.contains(flag),
                "`{sub} --help` should describe {flag}:\n{text}"
            );
        }
    }
}

#[tokio::test]
async fn status_lists_servers_and_matrices() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("model", 1, 1 << 40))
        .await
        .unwrap();
    c.push_keys("model", 0, &[1, 2, 3], &[1.0f32; 3])
        .await
        .unwrap();
    let out = Command::new(binary())
        .args(["status", "--master", &cluster.master.addr])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for s in &cluster.servers {
        assert!(
            text.contains(&s.addr),
            "status should list server {}:\n{text}",
            s.addr
        );
    }
    assert!(
        text.contains("model") && text.contains("Sparse") && text.contains("1 x 1099511627776"),
        "{text}"
    );
}

#[test]
fn status_of_a_missing_master_fails_with_a_clear_error() {
    let out = Command::new(binary())
        .args(["status", "--master", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("master 127.0.0.1:1 is unreachable"), "{err}");
}

#[tokio::test]
async fn standalone_serves_and_stops_cleanly_on_sigterm() {
    let mut node = Node::spawn(&["standalone", "--servers", "2", "--bind", "127.0.0.1:0"]);
    let client = angel_client::PsClient::connect(&node.addr).await.unwrap();
    client
        .create_matrix(MatrixSpec::dense("x", 1, 10))
        .await
        .unwrap();
    assert_eq!(client.status().await.unwrap().servers.len(), 2);
    assert_eq!(
        node.terminate(Duration::from_secs(10)),
        Some(0),
        "exit code 0 on SIGTERM"
    );
}
