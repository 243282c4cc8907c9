//! Test harness: starts the real `angel-ps` binary as a master and servers on 127.0.0.1
//! (port 0 everywhere) and stops them when dropped, or when the test process dies.
//!
//! - [`binary`]: the `angel-ps` binary of this build (rebuilt when stale).
//! - [`Node`]: one child process and the address it printed.
//! - [`Cluster`]: a master and N servers, with a client connected to them.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock, mpsc};
use std::time::Duration;

use angel_client::{ClientConfig, PsClient};

/// How long a process may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(60);

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

/// A child process running `angel-ps`, killed when dropped.
pub struct Node {
    child: Child,
    /// The address the process printed on its first line.
    pub addr: String,
}

impl Node {
    /// Runs `angel-ps args...` and waits for its "listening on ADDR" line.
    pub fn spawn(args: &[&str]) -> Node {
        let mut command = Command::new(binary());
        command
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        die_with_parent(&mut command);
        let mut child = command.spawn().expect("angel-ps starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep draining so the child never blocks on a full pipe.
            lines.for_each(drop);
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("angel-ps {args:?} printed no address within {START_TIMEOUT:?}");
            }
        };
        let addr = line
            .rsplit(' ')
            .next()
            .expect("address at end of line")
            .to_string();
        Node { child, addr }
    }

    /// Sends SIGTERM and waits up to `timeout` for a clean exit; returns the exit code.
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Kills the process at once (a crash, as far as the others can tell).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Asks the kernel to kill the child if this test process dies first.
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
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
        let master = Node::spawn(&["master", "--bind", "127.0.0.1:0"]);
        let servers = (0..servers)
            .map(|_| {
                let mut args = vec!["server", "--master", &master.addr, "--bind", "127.0.0.1:0"];
                args.extend_from_slice(server_args);
                Node::spawn(&args)
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
