//! TLS: a CA and node certificates made here (rcgen); master and servers started with
//! `--tls-cert`, `--tls-key`, `--tls-ca` and a token serve TLS only. A client with the CA and
//! the token works; one without the token, with a wrong one, that trusts another CA, or that
//! speaks plain HTTP/2 is refused, and nothing changes. The command line, a job and Ballista
//! executors take the CA from their flags or their environment.

use std::path::{Path, PathBuf};
use std::process::Command;

use angel_client::MatrixSpec;
use angel_local_cluster::{LocalCluster, Options};
use angel_tests::{Cluster, binary, client_as, expect, repo, result_value, run_job, token_file};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use tonic::Code;

/// PEM files of a test CA, a node certificate it signed (for 127.0.0.1 and localhost) with
/// its key, and a second CA that signed nothing of this service.
struct Pki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    other_ca: PathBuf,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        let (ca, ca_pem) = certificate_authority("angel-ps test CA");
        let (_, other_pem) = certificate_authority("some other CA");
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &*ca).unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        Pki {
            ca: write("ca.pem", ca_pem),
            cert: write("node.pem", cert.pem()),
            key: write("node.key", key.serialize_pem()),
            other_ca: write("other-ca.pem", other_pem),
        }
    }

    /// The node flags: token and TLS.
    fn node_flags(&self, token: &Path) -> Vec<String> {
        let mut flags = vec!["--token-file".to_string(), path(token)];
        for (flag, file) in [
            ("--tls-cert", &self.cert),
            ("--tls-key", &self.key),
            ("--tls-ca", &self.ca),
        ] {
            flags.extend([flag.to_string(), path(file)]);
        }
        flags
    }
}

/// A self-signed CA named `name`, and its certificate as PEM.
fn certificate_authority(name: &str) -> (CertifiedIssuer<'static, KeyPair>, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let pem = ca.pem();
    (ca, pem)
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_token_and_ca_work_and_a_missing_or_wrong_token_or_untrusted_ca_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let (token_path, token) = token_file(dir.path());
    let flags = pki.node_flags(&token_path);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    // Servers register with the master over TLS, and the master calls each back over TLS.
    let cluster = Cluster::start_flags(2, &flags, &flags);
    let addr = &cluster.master.addr;

    let good = client_as(addr, Some(&token), Some(&pki.ca)).await.unwrap();
    good.create_matrix(MatrixSpec::sparse("m", 1, 1 << 40))
        .await
        .unwrap();
    let keys = [3u64, 1 << 39, (1 << 40) - 1];
    good.push_keys("m", 0, &keys, &[1.0f32, 2.0, 3.0])
        .await
        .unwrap();

    let missing = client_as(addr, None, Some(&pki.ca)).await.unwrap_err();
    expect(missing, Code::Unauthenticated, &["requires a token"]);
    let wrong = client_as(addr, Some(&"0".repeat(64)), Some(&pki.ca))
        .await
        .unwrap_err();
    expect(wrong, Code::Unauthenticated, &["wrong token"]);
    let untrusted = client_as(addr, Some(&token), Some(&pki.other_ca))
        .await
        .unwrap_err();
    expect(
        untrusted,
        Code::Unavailable,
        &["certificate", "UnknownIssuer"],
    );
    let plain = client_as(addr, Some(&token), None).await.unwrap_err();
    expect(plain, Code::Unavailable, &["ANGEL_TLS_CA", "--tls-ca"]);

    let values: Vec<f32> = good.pull_keys("m", 0, &keys).await.unwrap();
    assert_eq!(values, [1.0, 2.0, 3.0], "nothing changed");

    // `angel-ps status` takes the CA from --tls-ca or ANGEL_TLS_CA, the token from ANGEL_TOKEN_FILE.
    let status = |flag: Option<&Path>, env: Option<&Path>| {
        let mut command = Command::new(binary());
        command
            .args(["status", "--master", addr, "--output", "json"])
            .env("ANGEL_TOKEN_FILE", &token_path)
            .env_remove("ANGEL_TOKEN")
            .env_remove("ANGEL_TLS_CA");
        if let Some(ca) = flag {
            command.arg("--tls-ca").arg(ca);
        }
        if let Some(ca) = env {
            command.env("ANGEL_TLS_CA", ca);
        }
        command.output().unwrap()
    };
    for out in [status(Some(&pki.ca), None), status(None, Some(&pki.ca))] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(r#""m""#), "status lists matrix m: {stdout}");
    }
    let refused = status(Some(&pki.other_ca), None);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("certificate"), "{said}");
    assert!(!said.contains(&token));
}

#[test]
fn a_job_and_ballista_executors_train_over_tls_with_the_ca_and_token_of_their_environment() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let (token_path, _) = token_file(dir.path());
    let env = vec![
        ("ANGEL_TOKEN_FILE".to_string(), path(&token_path)),
        ("ANGEL_TLS_CA".to_string(), path(&pki.ca)),
    ];
    let options = Options {
        env: env.clone(),
        node_args: pki.node_flags(&token_path),
        ..Options::default()
    };
    let cluster = LocalCluster::start_with(&binary(), 2, 2, 2, &options).expect("cluster starts");
    let job = repo("examples/a9a/job.sql");
    let data = format!("data={}", repo("examples/data/a9a").display());
    let master = cluster.master.addr.as_str();
    let ca = path(&pki.ca);
    let embedded = [job.to_str().unwrap(), "--master", master, "--var", &data];
    let on_ballista = [&embedded[..], &["--ballista", cluster.scheduler_url()]].concat();
    // The job's own client takes --tls-ca; the executors read ANGEL_TLS_CA and the token.
    let token_only = &env[..1];
    for (args, env) in [
        ([&embedded[..], &["--tls-ca", &ca]].concat(), token_only),
        (on_ballista, &env[..]),
    ] {
        let (_, out) = run_job(&args, env);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(result_value(&stdout, "test_auc") > 0.85, "{stdout}");
    }
    let (_, refused) = run_job(&embedded, token_only);
    assert!(!refused.status.success(), "a job without the CA ran");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("ANGEL_TLS_CA"), "{said}");
}

#[test]
fn tls_flags_must_come_together_and_name_a_bad_file_or_a_key_of_another_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let (cert, key, ca) = (path(&pki.cert), path(&pki.key), path(&pki.ca));
    let other_key = dir.path().join("other.key");
    std::fs::write(&other_key, KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let other_key = path(&other_key);
    let cases: [(&[&str], &[&str]); 4] = [
        (&["--tls-cert", &cert], &["--tls-key", "together"]),
        (
            &["--tls-cert", &key, "--tls-key", &key, "--tls-ca", &ca],
            &["--tls-cert", "node.key", "no PEM certificate"],
        ),
        (
            &["--tls-cert", &cert, "--tls-key", &cert, "--tls-ca", &ca],
            &["--tls-key", "node.pem", "no PEM private key"],
        ),
        (
            &[
                "--tls-cert",
                &cert,
                "--tls-key",
                &other_key,
                "--tls-ca",
                &ca,
            ],
            &["--tls-cert / --tls-key", "node.pem"],
        ),
    ];
    for (flags, words) in cases {
        for node in [
            &["master", "--bind", "127.0.0.1:0"][..],
            &["standalone", "--bind", "127.0.0.1:0"][..],
        ] {
            let out = Command::new(binary())
                .args(node)
                .args(flags)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{node:?} {flags:?} started");
            let said = String::from_utf8_lossy(&out.stderr);
            for w in words {
                assert!(
                    said.contains(w),
                    "{node:?} {flags:?}: '{said}' should mention '{w}'"
                );
            }
        }
    }
}
