//! What every chaos scenario is made of: masters and servers as processes of this binary on
//! 127.0.0.1 sharing one snapshot directory, and waits on the master's status.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_client::{PsClient, PsError};
use angel_proto::StatusReply;
use tonic::Code;

use angel_local_cluster::{Process, free_port};

/// A scenario's error: an expectation it did not meet, or a call that failed.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The binary scenarios start, the Python a Python writer runs on, and the folder their master
/// keeps its state and snapshots in (removed when dropped).
pub struct Lab {
    binary: PathBuf,
    python: PathBuf,
    dir: tempfile::TempDir,
}

impl Lab {
    /// A lab starting `binary` and Python writers on `python`, with a fresh snapshot directory.
    pub fn new(binary: &Path, python: &Path) -> Result<Lab> {
        Ok(Lab {
            binary: binary.to_path_buf(),
            python: python.to_path_buf(),
            dir: tempfile::tempdir()?,
        })
    }

    /// The Python a Python writer runs on (one with the `angel_ps` package).
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// The binary its processes run.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The snapshot directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `angel-ps args...`, once it printed its address.
    pub fn spawn(&self, args: &[&str]) -> Result<Process> {
        Ok(Process::spawn(&self.binary, args)?)
    }

    /// A master at `bind` that declares servers dead after `timeout` seconds of silence, with
    /// its state and snapshots in the lab's directory if `stateful` (snapshots only when asked
    /// for), and `extra` flags.
    pub fn master(
        &self,
        bind: &str,
        stateful: bool,
        timeout: &str,
        extra: &[&str],
    ) -> Result<Process> {
        let root = self.dir().display().to_string();
        let mut args = vec!["master", "--bind", bind, "--server-timeout-secs", timeout];
        if stateful {
            args.extend(["--snapshot-dir", &root, "--snapshot-interval-secs", "3600"]);
        }
        args.extend_from_slice(extra);
        self.spawn(&args)
    }

    /// A master at `bind` whose servers snapshot what changed every `interval` seconds, and
    /// which declares servers dead after `timeout` seconds of silence.
    pub fn snapshotting_master(
        &self,
        bind: &str,
        timeout: &str,
        interval: &str,
    ) -> Result<Process> {
        let root = self.dir().display().to_string();
        let args = [
            "--snapshot-dir",
            &root,
            "--snapshot-interval-secs",
            interval,
        ];
        self.spawn(
            &[
                &["master", "--bind", bind, "--server-timeout-secs", timeout][..],
                &args,
            ]
            .concat(),
        )
    }

    /// A server of `master` at `bind` (port 0: any), heartbeating every 200 ms.
    pub fn server(&self, master: &str, bind: &str) -> Result<Process> {
        let args = [
            "server",
            "--master",
            master,
            "--bind",
            bind,
            "--heartbeat-ms",
            "200",
        ];
        self.spawn(&args)
    }

    /// `count` servers of `master` on any port.
    pub fn servers(&self, master: &str, count: usize) -> Result<Vec<Process>> {
        (0..count)
            .map(|_| self.server(master, "127.0.0.1:0"))
            .collect()
    }
}

/// A free address on 127.0.0.1, for a process that must come back where it was.
pub fn free_addr() -> Result<String> {
    Ok(format!("127.0.0.1:{}", free_port()?))
}

/// A client of the master at `addr`.
pub async fn connect(addr: &str) -> Result<Arc<PsClient>> {
    Ok(PsClient::connect(addr).await?)
}

/// Fails the scenario with `what` unless `holds`.
pub fn ensure(holds: bool, what: impl FnOnce() -> String) -> Result<()> {
    match holds {
        true => Ok(()),
        false => Err(what().into()),
    }
}

/// Checks that a call was refused with `code` and a message naming every one of `words`.
pub fn refused<T>(result: angel_client::Result<T>, code: Code, words: &[&str]) -> Result<()> {
    let err: PsError = match result {
        Ok(_) => return Err(format!("a call was accepted; refused with {code:?} expected").into()),
        Err(e) => e,
    };
    ensure(err.code() == code, || format!("{code:?} expected: {err}"))?;
    for word in words {
        ensure(err.to_string().contains(word), || {
            format!("'{err}' should mention '{word}'")
        })?;
    }
    Ok(())
}

/// Polls the status until `done` holds (at most `limit`), and returns it.
pub async fn wait_for(
    c: &PsClient,
    done: impl Fn(&StatusReply) -> bool,
    limit: Duration,
) -> Result<StatusReply> {
    let deadline = Instant::now() + limit;
    loop {
        let status = c.status().await?;
        if done(&status) {
            return Ok(status);
        }
        ensure(Instant::now() < deadline, || {
            format!("not within {limit:?}: {status:?}")
        })?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Partitions the status shows on live servers.
pub fn held(status: &StatusReply) -> usize {
    status.servers.iter().map(|s| s.partitions.len()).sum()
}

/// Sends `signal` (STOP, CONT) to `process`.
pub fn signal(process: &Process, signal: &str) -> Result<()> {
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &process.pid().to_string()])
        .status()?;
    ensure(sent.success(), || format!("kill -{signal} failed"))
}

/// Copies the files of `from` (recursively) into `to`.
pub fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        match entry.file_type()?.is_dir() {
            true => copy_dir(&entry.path(), &target)?,
            false => drop(std::fs::copy(entry.path(), target)?),
        }
    }
    Ok(())
}
