//! Servers killed with SIGKILL: one restarted on its own address, two at once, every one,
//! and one killed under a stream of pushes. Snapshots restore what they hold, clients replay
//! what is newer, and nothing applies twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_client::PsClient;
use angel_local_cluster::Process;
use angel_proto::StatusReply;

use super::Outcome;
use super::lab::{Lab, Result, connect, ensure, free_addr, wait_for};
use super::probe::Probe;

/// A master at `bind` (servers silent for `timeout` seconds declared dead) and `servers`
/// servers, with a probe filled and snapshotted, then added to once more: the second change
/// is kept only by the client, for replay.
async fn snapshotted(
    lab: &Lab,
    bind: &str,
    timeout: &str,
    servers: usize,
) -> Result<(Process, Vec<Process>, Arc<PsClient>, Probe)> {
    let master = lab.master(bind, true, timeout, &[])?;
    let servers = lab.servers(bind, servers)?;
    let c = connect(bind).await?;
    let mut probe = Probe::filled(&c, "w").await?;
    c.snapshot().await?;
    probe.add(&c, 1.0).await?;
    Ok((master, servers, c, probe))
}

/// A server restarted on its address replaces its dead predecessor at once, not after the
/// timeout, and the master gives the new process its own admin token.
pub async fn restarted_on_address(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let _master = lab.master(&bind, true, "30", &[])?;
    let at = free_addr()?;
    let _kept = lab.servers(&bind, 1)?;
    let mut doomed = lab.server(&bind, &at)?;
    let c = connect(&bind).await?;
    let mut probe = Probe::filled(&c, "w").await?;
    c.snapshot().await?;

    doomed.kill();
    let fault = Instant::now();
    let _again = lab.server(&bind, &at)?;
    probe.add(&c, 1.0).await?;
    let tally = probe.seal_and_tally(&c).await?;
    let recovery = fault.elapsed();
    let status = c.status().await?;
    let found = status.recoveries.iter().find(|r| r.addr == at);
    let Some(r) = found else {
        return Err(format!("no recovery of {at}: {:?}", status.recoveries).into());
    };
    ensure(r.cause.contains("registered at its address"), || {
        format!("{r:?}")
    })?;
    ensure(r.error.is_empty(), || format!("{r:?}"))?;
    ensure(recovery < Duration::from_secs(20), || {
        format!("{recovery:?}: waited for the 30 s timeout")
    })?;
    Ok(Outcome { tally, recovery })
}

/// Two of three servers die before the master hears of either: the first recovery picks the
/// second as a target, fails there, and goes on to the survivor.
pub async fn two_at_once(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let (_master, mut servers, c, probe) = snapshotted(lab, &bind, "30", 3).await?;
    servers[0].kill();
    servers[1].kill();
    let fault = Instant::now();
    let tally = probe.seal_and_tally(&c).await?;
    let recovery = fault.elapsed();
    let status = c.status().await?;
    ensure(status.recoveries.len() == 2, || {
        format!("two recoveries: {:?}", status.recoveries)
    })?;
    for r in &status.recoveries {
        ensure(r.error.is_empty(), || format!("{r:?}"))?;
    }
    Ok(Outcome { tally, recovery })
}

/// Every server dies: the partitions wait, "not restored yet", for a newcomer, and a pull
/// blocked meanwhile ends once it took them.
pub async fn every_server(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let (_master, mut servers, c, probe) = snapshotted(lab, &bind, "2", 2).await?;
    servers[0].kill();
    servers[1].kill();
    let fault = Instant::now();
    let (reader, read) = (c.clone(), probe.clone());
    let pull = tokio::spawn(async move { read.tally(&reader).await });
    let waiting = |s: &StatusReply| s.servers.is_empty() && s.recoveries.len() == 2;
    let status = wait_for(&c, waiting, Duration::from_secs(20)).await?;
    for r in &status.recoveries {
        ensure(r.error.contains("not restored yet"), || format!("{r:?}"))?;
    }
    let _newcomer = lab.servers(&bind, 1)?;
    let Ok(tally) = tokio::time::timeout(Duration::from_secs(40), pull).await else {
        return Err("the pull did not end once a server took the partitions".into());
    };
    let tally = tally??;
    let recovery = fault.elapsed();
    let status = c.status().await?;
    for r in &status.recoveries {
        ensure(r.error.is_empty() && r.restored > 0, || format!("{r:?}"))?;
    }
    let tally = tally + probe.seal_and_tally(&c).await?;
    Ok(Outcome { tally, recovery })
}

/// Pushes and increases stream on while a server is killed (snapshots every 0.3 s, so restores,
/// replays and fresh changes interleave): every acknowledged change is there, once.
pub async fn mid_stream(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let _master = lab.snapshotting_master(&bind, "2", "0.3")?;
    let mut servers = lab.servers(&bind, 3)?;
    let c = connect(&bind).await?;
    let mut probe = Probe::filled(&c, "w").await?;
    let writer = c.clone();
    let stream = tokio::spawn(async move {
        let mut acked = Vec::new();
        for _ in 0..150 {
            probe.add(&writer, 1.0).await?;
            acked.push(Instant::now());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((probe, acked))
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    servers[1].kill();
    let fault = Instant::now();
    let (probe, acked) = stream.await??;
    let Some(after) = acked.iter().find(|t| **t > fault) else {
        return Err("every change was acknowledged before the kill: kill sooner".into());
    };
    let recovery = after.duration_since(fault);
    let tally = probe.seal_and_tally(&c).await?;
    Ok(Outcome { tally, recovery })
}
