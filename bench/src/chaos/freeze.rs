//! A frozen server (SIGSTOP past the timeout, then SIGCONT): replaced while frozen, fenced when
//! it wakes, so it neither serves its stale copies nor snapshots them over the new owners'. A
//! frozen master: woken, it does not count its own pause against the servers.

use std::time::{Duration, Instant};

use angel_proto::StatusReply;

use super::Outcome;
use super::lab::{Lab, Result, connect, ensure, free_addr, signal, wait_for};
use super::probe::Probe;

/// Freezes one of three servers holding changes no snapshot has, pushes through the freeze,
/// wakes it, then kills a new owner: its partitions come back from snapshots no stale copy
/// replaced, read by a client with nothing to replay.
pub async fn frozen(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let _master = lab.snapshotting_master(&bind, "2", "0.2")?;
    let mut servers = lab.servers(&bind, 3)?;
    let c = connect(&bind).await?;
    let mut probe = Probe::filled(&c, "w").await?;
    c.snapshot().await?;
    probe.add(&c, 1.0).await?;
    signal(&servers[1], "STOP")?;
    let fault = Instant::now();
    // Blocked on the frozen server, the push fails over to its replacement.
    probe.add(&c, 1.0).await?;
    let recovery = fault.elapsed();
    let mut tally = probe.tally(&c).await?;
    let status = c.status().await?;
    // A live server starved of CPU past the 2 s timeout may be replaced too: still exact.
    let frozen = &servers[1].addr;
    ensure(status.recoveries.iter().any(|r| &r.addr == frozen), || {
        format!(
            "the frozen server was not replaced: {:?}",
            status.recoveries
        )
    })?;

    signal(&servers[1], "CONT")?;
    let rejoined = |s: &StatusReply| s.servers.len() == 3;
    wait_for(&c, rejoined, Duration::from_secs(20)).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    probe.add(&c, 1.0).await?;
    c.snapshot().await?;
    let fresh = connect(&bind).await?;
    drop(c);
    servers[0].kill();
    tally = tally + probe.seal_and_tally(&fresh).await?;
    Ok(Outcome { tally, recovery })
}

/// Freezes the master for three server timeouts with changes acknowledged and not yet
/// snapshotted, then wakes it: it gives the servers a fresh grace period instead of declaring
/// them dead for a silence that was its own, so nothing is recovered or replayed, and every
/// change acknowledged before and after stays.
pub async fn frozen_master(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let master = lab.snapshotting_master(&bind, "2", "0.2")?;
    let _servers = lab.servers(&bind, 3)?;
    let c = connect(&bind).await?;
    let mut probe = Probe::filled(&c, "w").await?;
    probe.add(&c, 1.0).await?;
    signal(&master, "STOP")?;
    tokio::time::sleep(Duration::from_secs(6)).await;
    signal(&master, "CONT")?;
    let woke = Instant::now();
    probe.add(&c, 1.0).await?;
    let recovery = woke.elapsed();
    // The old master declared every server dead within 10 ms of waking; a grace period ends
    // two seconds later, and live servers heartbeat within it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = c.status().await?;
    ensure(status.recoveries.is_empty(), || {
        format!(
            "the master declared servers dead for its own pause: {:?}",
            status.recoveries
        )
    })?;
    ensure(status.servers.len() == 3, || {
        format!("{} of 3 servers listed", status.servers.len())
    })?;
    probe.add(&c, 1.0).await?;
    let tally = probe.seal_and_tally(&c).await?;
    Ok(Outcome { tally, recovery })
}
