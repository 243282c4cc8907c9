//! Test harness: starts the real `angel-ps` binary as a master and servers on 127.0.0.1
//! (port 0 everywhere) and stops them when dropped, or when the test process dies.
//!
//! - [`binary`]: the `angel-ps` binary of this build (rebuilt when stale).
//! - [`Node`]: one child process and the address it printed.
//! - [`Cluster`]: a master and N servers, with a client connected to them.
//! - [`run_job`], [`result_value`] and [`summary`]: `angel-ps run` as a user runs it, and
//!   its results read from its JSON lines.
//! - [`s3_server`]: a real S3 server on 127.0.0.1.

pub mod s3_server;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use angel_client::{ClientConfig, PsClient, PsError};
use angel_proto::credential::Token;
use angel_proto::server_client::ServerClient;
use angel_proto::tls::Trust;
use angel_proto::{PushRequest, RowSlice, ValueType, wire};
use serde_json::Value;
use tonic::Code;
use tonic::transport::Channel;

/// The `angel-ps` binary of this build, rebuilt first if any source changed: `cargo test`
/// alone does not rebuild another package's binary, and a stale one would test old code.
/// `ANGEL_PS_BIN` overrides the path (and skips the build).
pub fn binary() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(path) = std::env::var_os("ANGEL_PS_BIN") {
            return PathBuf::from(path);
        }
        let mut build = Command::new(env!("CARGO"));
        // The whole workspace with every target, as `cargo test --workspace` builds it: a
        // narrower selection unifies features differently and rebuilds DataFusion.
        build.args(["build", "--quiet", "--workspace", "--all-targets"]);
        // Cargo sets these for the test binary; build scripts that track them (ring's, via cc)
        // would see a different environment than `cargo test` had and rebuild everything
        // above them, DataFusion included.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("CARGO_PKG_")
                || key.starts_with("CARGO_BIN_")
                || [
                    "CARGO_MANIFEST_DIR",
                    "CARGO_MANIFEST_PATH",
                    "CARGO_CRATE_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                ]
                .contains(&key.as_ref())
            {
                build.env_remove(key.as_ref());
            }
        }
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        assert!(
            build.status().expect("cargo runs").success(),
            "building angel-ps failed"
        );
        let exe = std::env::current_exe().expect("test binary path");
        let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
        dir.join(format!("angel-ps{}", std::env::consts::EXE_SUFFIX))
    })
    .clone()
}

/// A fresh token from `angel-ps token`, written to `angel.token` in `dir`; its path and the
/// token.
pub fn token_file(dir: &Path) -> (PathBuf, String) {
    let out = Command::new(binary()).arg("token").output().unwrap();
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(token.len(), 64, "256 bits as hex: {token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    let path = dir.join("angel.token");
    std::fs::write(&path, format!("{token}\n")).unwrap();
    (path, token)
}

/// The `stock-ballista-scheduler` test binary of this build (a scheduler without our
/// functions), beside [`binary`].
pub fn stock_scheduler() -> PathBuf {
    binary().with_file_name(format!(
        "stock-ballista-scheduler{}",
        std::env::consts::EXE_SUFFIX
    ))
}

/// Runs `scenario` of `angel-ps bench chaos` once with this build's binary; it must finish
/// (meet every expectation) with no value lost or applied twice.
pub async fn survives(scenario: angel_bench::chaos::Scenario) {
    let outcome = scenario
        .run(&binary())
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", scenario.name()));
    assert_eq!(outcome.tally.lost, 0, "nothing lost: {outcome:?}");
    assert_eq!(
        outcome.tally.doubled, 0,
        "nothing applied twice: {outcome:?}"
    );
    eprintln!("{}: recovered in {:?}", scenario.name(), outcome.recovery);
}

/// A child process running `angel-ps`, killed when dropped.
pub use angel_local_cluster::Process as Node;

/// Runs `angel-ps args...` of this build and waits for its "listening on ADDR" line.
pub fn spawn(args: &[&str]) -> Node {
    Node::spawn(&binary(), args).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `command` to the end and returns its stdout, after checking it succeeded (its
/// output and errors in the failure).
pub fn stdout_of(command: &mut Command) -> String {
    let out = command.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    text
}

/// Runs `angel-ps run --output json args...` to the end with `env` added; returns its pid and
/// output.
pub fn run_job(args: &[&str], env: &[(String, String)]) -> (u32, Output) {
    let mut job = start_job(args, env);
    let status = job.child.wait().expect("angel-ps run ends");
    let output = Output {
        status,
        stdout: job.stdout.join().expect("stdout"),
        stderr: job.stderr.join().expect("stderr"),
    };
    (job.child.id(), output)
}

/// A running `angel-ps run` whose output is read as it comes, so a job that writes more than
/// a pipe holds never blocks on a test that is not reading yet.
pub struct Job {
    child: Child,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

impl Job {
    /// Whether it has not ended yet.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the job's process (SIGKILL) and waits for it, as a crash or `kill -9` would end
    /// it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `angel-ps run --output json args...` with `env` added, its output piped.
pub fn start_job(args: &[&str], env: &[(String, String)]) -> Job {
    let mut child = Command::new(binary())
        .args(["run", "--output", "json"])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("angel-ps run starts");
    Job {
        stdout: drain(child.stdout.take()),
        stderr: drain(child.stderr.take()),
        child,
    }
}

/// Reads `pipe` to its end on a thread of its own.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Waits (at most 10 minutes, then kills it) for a job from [`start_job`] to end; returns its
/// stdout after checking it succeeded.
pub fn finished(mut job: Job) -> String {
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = job.child.try_wait().expect("job status") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = job.child.kill();
            panic!("the job did not finish within 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = String::from_utf8_lossy(&job.stdout.join().expect("stdout")).to_string();
    let stderr = job.stderr.join().expect("stderr");
    assert!(
        status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&stderr)
    );
    stdout
}

/// `path` inside the repository (an example job, a data file).
pub fn repo(path: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// The JSON lines a job printed with `--output json`, each parsed; a line that is not JSON
/// fails the test, naming it.
pub fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The first row of the first statement result (`"kind": "result"`) with a column named
/// `column`, as column name to number (non-numbers left out).
pub fn result_row(stdout: &str, column: &str) -> HashMap<String, f64> {
    let lines = json_lines(stdout);
    let row = lines
        .iter()
        .filter(|l| l["kind"] == "result")
        .filter_map(|l| l["rows"].get(0))
        .find(|row| row.get(column).is_some())
        .unwrap_or_else(|| panic!("no result with column {column} in:\n{stdout}"));
    let row = row.as_object().expect("a row is an object");
    row.iter()
        .filter_map(|(name, value)| Some((name.clone(), value.as_f64()?)))
        .collect()
}

/// `column` of [`result_row`], as a number.
pub fn result_value(stdout: &str, column: &str) -> f64 {
    let row = result_row(stdout, column);
    *row.get(column)
        .unwrap_or_else(|| panic!("column {column} is not a number in:\n{stdout}"))
}

/// The job's summary line (`"kind": "summary"`).
pub fn summary(stdout: &str) -> Value {
    json_lines(stdout)
        .into_iter()
        .find(|l| l["kind"] == "summary")
        .unwrap_or_else(|| panic!("no summary in:\n{stdout}"))
}

/// A master and servers as separate processes.
pub struct Cluster {
    /// The master process.
    pub master: Node,
    /// The server processes.
    pub servers: Vec<Node>,
}

impl Cluster {
    /// A master and `servers` servers with default flags.
    pub fn start(servers: usize) -> Cluster {
        Self::start_with(servers, &[])
    }

    /// A master and `servers` servers, each given `server_args` as extra flags.
    pub fn start_with(servers: usize, server_args: &[&str]) -> Cluster {
        Self::start_flags(servers, &[], server_args)
    }

    /// A master given `master_args` and `servers` servers given `server_args` as extra flags.
    pub fn start_flags(servers: usize, master_args: &[&str], server_args: &[&str]) -> Cluster {
        let mut args = vec!["master", "--bind", "127.0.0.1:0"];
        args.extend_from_slice(master_args);
        let master = spawn(&args);
        let servers = (0..servers)
            .map(|_| {
                let mut args = vec!["server", "--master", &master.addr, "--bind", "127.0.0.1:0"];
                args.extend_from_slice(server_args);
                spawn(&args)
            })
            .collect();
        Cluster { master, servers }
    }

    /// A client of this cluster.
    pub async fn client(&self) -> Arc<PsClient> {
        self.client_with(ClientConfig::default()).await
    }

    /// A client of this cluster with `config`.
    pub async fn client_with(&self, config: ClientConfig) -> Arc<PsClient> {
        PsClient::connect_with(&self.master.addr, config)
            .await
            .expect("client connects")
    }
}

/// A client of the master at `addr` sending `token` and trusting the CA in the file `ca`,
/// if given.
pub async fn client_as(
    addr: &str,
    token: Option<&str>,
    ca: Option<&Path>,
) -> Result<Arc<PsClient>, PsError> {
    let config = ClientConfig {
        token: token.map(|t| Token::new(t, "the test").unwrap()),
        trust: ca.map(|p| Trust::from_file(p, "the test").unwrap()),
        ..ClientConfig::default()
    };
    PsClient::connect_with(addr, config).await
}

/// A push of `value` to `key` of row 0 of matrix `matrix_id`, partition 0: what a raw
/// request straight to a server sends.
pub fn push_one(matrix_id: u32, key: u64, value: f32) -> PushRequest {
    PushRequest {
        matrix_id,
        value_type: ValueType::F32 as i32,
        slices: vec![RowSlice {
            partition_id: 0,
            keys: wire::encode_keys(&[key]),
            values: wire::encode_values(&[value]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Checks that `err` travelled as `code` and mentions every one of `words`.
pub fn expect(err: PsError, code: Code, words: &[&str]) {
    assert_eq!(err.code(), code, "{err}");
    for w in words {
        assert!(err.to_string().contains(w), "'{err}' should mention '{w}'");
    }
}

/// The error a raw call must have returned, as the typed error a client would see.
pub fn status<T: std::fmt::Debug>(r: Result<tonic::Response<T>, tonic::Status>) -> PsError {
    PsError::from_status(r.expect_err("an error"), "server")
}

/// A raw gRPC client of the server at `addr`, for requests `PsClient` would never send.
pub async fn raw_server(addr: &str) -> ServerClient<Channel> {
    ServerClient::connect(format!("http://{addr}"))
        .await
        .expect("the server accepts connections")
        .max_decoding_message_size(usize::MAX)
}
