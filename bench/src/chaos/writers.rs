//! Changes whose writer cannot replay them: a server killed after its writer left (a Rust
//! client, or a Python process), and a writer whose replay buffer filled. Snapshots asked for
//! at the job's end, when a Python writer leaves its `with` block, or when the buffer fills,
//! keep them.

use std::process::Stdio;
use std::time::{Duration, Instant};

use angel_client::ClientConfig;
use angel_local_cluster::Process;

use super::Outcome;
use super::lab::{Lab, Result, connect, ensure, free_addr};
use super::probe::Probe;

/// A writer makes its changes durable (what a job does at its end) and leaves; a server dies;
/// a new client, which holds nothing to replay, reads every change. The snapshot interval (an
/// hour) never comes.
pub async fn writer_left(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let _master = lab.master(&bind, true, "30", &[])?;
    let mut servers = lab.servers(&bind, 2)?;
    let writer = connect(&bind).await?;
    let probe = Probe::filled(&writer, "w").await?;
    let written = writer.make_durable().await?;
    ensure(written.partitions > 0, || {
        format!("nothing made durable: {written:?}")
    })?;
    drop(writer);
    killed_then_read(&mut servers[1], &bind, &probe).await
}

/// How long the Python writer may take.
const PYTHON_LIMIT: Duration = Duration::from_secs(60);

/// A Python process connects, makes the probe's changes inside a `with` block, leaves it (which
/// makes them durable) and exits; a server dies; a Rust client reads every change. The
/// snapshot interval (an hour) never comes.
pub async fn python_writer_left(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let _master = lab.master(&bind, true, "30", &[])?;
    let mut servers = lab.servers(&bind, 2)?;
    let c = connect(&bind).await?;
    let mut probe = Probe::create(&c, "w").await?;
    let (matrix, keys, counter, words) = probe.changes();
    let script = format!(
        "import sys, angel_ps\n\
         with angel_ps.connect(sys.argv[1]) as ps:\n\
         \x20   ps.push({matrix:?}, {keys:?}, [1.0] * {n}, row=0)\n\
         \x20   ps.counter_add({counter:?}, {words:?})\n",
        n = keys.len(),
    );
    let python = lab.python().display();
    let writer = tokio::process::Command::new(lab.python())
        .args(["-c", &script, &bind])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{python} (--python) cannot be started: {e}"))?;
    let output = tokio::time::timeout(PYTHON_LIMIT, writer.wait_with_output())
        .await
        .map_err(|_| format!("the Python writer did not end within {PYTHON_LIMIT:?}"))??;
    ensure(output.status.success(), || {
        format!(
            "the Python writer failed (does {python} have the angel_ps package? see \
             docs/python.md, or name another with --python): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })?;
    probe.added_elsewhere(1.0);
    killed_then_read(&mut servers[1], &bind, &probe).await
}

/// Kills `server`, then reads `probe` back through a new client of the master at `bind`, which
/// holds nothing to replay.
async fn killed_then_read(server: &mut Process, bind: &str, probe: &Probe) -> Result<Outcome> {
    server.kill();
    let fault = Instant::now();
    let reader = connect(bind).await?;
    let tally = probe.seal_and_tally(&reader).await?;
    Ok(Outcome {
        tally,
        recovery: fault.elapsed(),
    })
}

/// A replay buffer with room for about two pushes: the client asks for snapshots instead of
/// dropping changes, so a server killed after 50 pushes loses none.
pub async fn full_replay_buffer(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let _master = lab.master(&bind, true, "30", &[])?;
    let mut servers = lab.servers(&bind, 2)?;
    let config = ClientConfig {
        replay_bytes: 4 << 10,
        ..ClientConfig::default()
    };
    let c = angel_client::PsClient::connect_with(&bind, config).await?;
    let mut probe = Probe::filled(&c, "w").await?;
    for _ in 1..50 {
        probe.add(&c, 1.0).await?;
    }
    servers[1].kill();
    let fault = Instant::now();
    let tally = probe.seal_and_tally(&c).await?;
    let recovery = fault.elapsed();
    ensure(c.replay_counts().1 == 0, || {
        format!("the client dropped changes: {:?}", c.replay_counts())
    })?;
    let status = c.status().await?;
    let mut partitions = status.servers.iter().flat_map(|s| &s.partitions);
    ensure(partitions.all(|p| p.durable > 1), || {
        format!("snapshots were not asked for: {status:?}")
    })?;
    Ok(Outcome { tally, recovery })
}
