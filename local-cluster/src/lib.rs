//! A whole deployment on this machine, as separate processes of the `angel-ps` binary: a PS
//! master and servers, a Ballista scheduler and executors, on 127.0.0.1. `demo --ballista`,
//! `bench e2e --ballista` and the tests use it; everything is killed when it is dropped, and
//! by the kernel if this process dies first.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a process may take to print its first line.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A child process, killed when dropped.
pub struct Process {
    child: Child,
    /// The last word of the first line it printed (its address).
    pub addr: String,
    /// The lines it printed after the first.
    lines: mpsc::Receiver<String>,
}

impl Process {
    /// Runs `binary args...` and waits for its first stdout line ("... listening on ADDR").
    pub fn spawn(binary: &Path, args: &[&str]) -> Result<Process, String> {
        Self::spawn_with_env(binary, args, &[])
    }

    /// [`Process::spawn`] with `env` added to the inherited environment.
    pub fn spawn_with_env(
        binary: &Path,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<Process, String> {
        let mut command = Command::new(binary);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        die_with_parent(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {} {args:?}: {e}", binary.display()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        // Reads every line, so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n').map_while(|l| l.ok()) {
                let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
            }
        });
        let Ok(line) = rx.recv_timeout(START_TIMEOUT) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "angel-ps {args:?} did not start within {START_TIMEOUT:?}"
            ));
        };
        let addr = line.rsplit(' ').next().unwrap_or_default().to_string();
        Ok(Process {
            child,
            addr,
            lines: rx,
        })
    }

    /// The last word of the next line it prints (the URL of `--http`), waiting up to
    /// `timeout`.
    pub fn next_word(&self, timeout: Duration) -> Option<String> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        line.rsplit(' ').next().map(str::to_string)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `timeout` for a clean exit; returns the exit code.
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
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

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Asks the kernel to kill the child if this process dies first.
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches only the child's own state.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// A free TCP port on 127.0.0.1 (Ballista executors need fixed ports: they advertise them).
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// What a [`LocalCluster`] runs with beyond its size.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Added to the scheduler's and executors' environment (the `AWS_*` settings of an S3
    /// stage, for example).
    pub env: Vec<(String, String)>,
    /// More flags of `angel-ps scheduler` (`--executor-timeout-secs`, for example).
    pub scheduler_args: Vec<String>,
    /// More flags of `angel-ps master` (`--http`, for example).
    pub master_args: Vec<String>,
    /// More flags of the PS master and every server (`--token-file`, TLS).
    pub node_args: Vec<String>,
}

/// A PS service and a Ballista cluster as separate processes.
pub struct LocalCluster {
    /// The PS master.
    pub master: Process,
    /// The PS servers.
    pub servers: Vec<Process>,
    /// The Ballista scheduler; its `addr` is `df://HOST:PORT`.
    pub scheduler: Process,
    /// The Ballista executors; their `addr` is the Flight address.
    pub executors: Vec<Process>,
}

impl LocalCluster {
    /// Starts `servers` PS servers and `executors` executors of `slots` task slots each, all
    /// running `binary`, and waits until every executor listens.
    pub fn start(
        binary: &Path,
        servers: usize,
        executors: usize,
        slots: usize,
    ) -> Result<LocalCluster, String> {
        Self::start_with(binary, servers, executors, slots, &Options::default())
    }

    /// [`LocalCluster::start`] with `options`.
    pub fn start_with(
        binary: &Path,
        servers: usize,
        executors: usize,
        slots: usize,
        options: &Options,
    ) -> Result<LocalCluster, String> {
        let env = options.env.as_slice();
        let node_args = options.node_args.iter().map(String::as_str);
        let mut args = vec!["master", "--bind", "127.0.0.1:0"];
        args.extend(options.master_args.iter().map(String::as_str));
        args.extend(node_args.clone());
        let master = Process::spawn(binary, &args)?;
        let servers = (0..servers)
            .map(|_| {
                let mut args = vec!["server", "--master", &master.addr];
                args.extend(node_args.clone());
                Process::spawn(binary, &args)
            })
            .collect::<Result<Vec<_>, _>>()?;
        args = vec!["scheduler", "--bind", "127.0.0.1:0"];
        args.extend(options.scheduler_args.iter().map(String::as_str));
        let scheduler = Process::spawn_with_env(binary, &args, env)?;
        let scheduler_addr = scheduler.addr.trim_start_matches("df://").to_string();
        let executors = (0..executors)
            .map(|_| executor(binary, &scheduler_addr, slots, env))
            .collect::<Result<Vec<_>, _>>()?;
        // One heartbeat round, so the scheduler knows every executor before the first job.
        std::thread::sleep(Duration::from_millis(500));
        Ok(LocalCluster {
            master,
            servers,
            scheduler,
            executors,
        })
    }

    /// The scheduler URL (`df://HOST:PORT`).
    pub fn scheduler_url(&self) -> &str {
        &self.scheduler.addr
    }
}

/// Attempts at starting one executor: its ports are picked free, but another process may take
/// one before the executor binds it.
const EXECUTOR_ATTEMPTS: usize = 3;

/// Starts an executor of `slots` task slots on free ports and waits until it accepts
/// connections on its Flight port; one that exits first (a port taken meanwhile) is started
/// again on other ports. `scheduler` is the scheduler's `HOST:PORT`.
pub fn executor(
    binary: &Path,
    scheduler: &str,
    slots: usize,
    env: &[(String, String)],
) -> Result<Process, String> {
    let slots = slots.to_string();
    let mut failure = String::new();
    for _ in 0..EXECUTOR_ATTEMPTS {
        let (flight, grpc) = (free_port()?.to_string(), free_port()?.to_string());
        let args = [
            "executor",
            "--scheduler",
            scheduler,
            "--flight-port",
            &flight,
            "--grpc-port",
            &grpc,
            "--concurrent-tasks",
            &slots,
            // Often, so a scheduler told to declare executors dead quickly keeps live ones.
            "--heartbeat-secs",
            "1",
        ];
        let mut process = Process::spawn_with_env(binary, &args, env)?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if std::net::TcpStream::connect(&process.addr).is_ok() {
                return Ok(process);
            }
            if let Ok(Some(status)) = process.child.try_wait() {
                failure = format!("executor at {} exited ({status})", process.addr);
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("executor at {} never listened", process.addr));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Err(format!("{failure}, {EXECUTOR_ATTEMPTS} times"))
}
