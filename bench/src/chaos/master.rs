//! Faults of the master's state: restarted without it, resumed from an older one, and a
//! snapshot store that fails (a full disk). In each the master refuses changes rather than
//! have a server drop data or restore old snapshots over newer live copies.

use std::time::{Duration, Instant};

use angel_client::MatrixSpec;
use angel_proto::{ServerStatus, StatusReply};
use tonic::Code;

use super::Outcome;
use super::lab::{Lab, Result, connect, copy_dir, ensure, free_addr, held, refused, wait_for};
use super::probe::Probe;

/// How long a master may take to see what its servers report.
const NOTICE: Duration = Duration::from_secs(20);

/// A master restarted without its state doubts and refuses changes; resumed with it, every
/// partition is where it was; told `--start-empty`, its servers drop what they hold.
pub async fn without_state(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let mut first = lab.master(&bind, true, "30", &[])?;
    let _servers = lab.servers(&bind, 2)?;
    let c = connect(&bind).await?;
    let probe = Probe::filled(&c, "w").await?;
    let before = held(&c.status().await?);

    first.kill();
    let fault = Instant::now();
    let mut stateless = lab.master(&bind, false, "30", &[])?;
    let status = wait_for(&c, |s| !s.doubt.is_empty(), NOTICE).await?;
    ensure(status.doubt.contains("does not know"), || {
        status.doubt.clone()
    })?;
    let create = c.create_matrix(MatrixSpec::sparse("x", 1, 10)).await;
    refused(
        create,
        Code::FailedPrecondition,
        &["refuses changes", "--start-empty"],
    )?;

    stateless.kill();
    let mut resumed = lab.master(&bind, true, "30", &[])?;
    let fresh = connect(&bind).await?;
    let tally = probe.tally(&fresh).await?;
    let recovery = fault.elapsed();
    let status = wait_for(&fresh, |s| s.servers.len() == 2, NOTICE).await?;
    ensure(status.doubt.is_empty(), || status.doubt.clone())?;
    ensure(status.recoveries.is_empty(), || {
        format!("nothing to recover: {:?}", status.recoveries)
    })?;
    ensure(held(&status) == before, || {
        format!("{before} partitions kept in place: {status:?}")
    })?;
    let tally = tally + probe.seal_and_tally(&fresh).await?;

    resumed.kill();
    let _empty = lab.master(&bind, true, "30", &["--start-empty"])?;
    let emptied = |s: &StatusReply| s.servers.len() == 2 && held(s) == 0;
    let status = wait_for(&fresh, emptied, NOTICE).await?;
    ensure(status.doubt.is_empty(), || status.doubt.clone())?;
    Probe::filled(&fresh, "w").await?;
    Ok(Outcome { tally, recovery })
}

/// A master resumed from a copy of its state older than what its servers saw doubts, refuses
/// changes and, past the server timeout, has declared nothing dead or restored anything.
pub async fn older_state(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let mut first = lab.master(&bind, true, "2", &[])?;
    let _servers = lab.servers(&bind, 2)?;
    let c = connect(&bind).await?;
    let w = Probe::filled(&c, "w").await?;
    let older = tempfile::tempdir()?;
    let state = lab.dir().join("master");
    copy_dir(&state, older.path())?;
    let v = Probe::filled(&c, "v").await?;

    first.kill();
    std::fs::remove_dir_all(&state)?;
    copy_dir(older.path(), &state)?;
    let fault = Instant::now();
    let _resumed = lab.master(&bind, true, "2", &[])?;
    let status = wait_for(&c, |s| !s.doubt.is_empty(), NOTICE).await?;
    ensure(status.doubt.contains("newer than the saved state"), || {
        status.doubt.clone()
    })?;
    refused(
        c.create_counter("f").await,
        Code::FailedPrecondition,
        &["refuses changes"],
    )?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = c.status().await?;
    ensure(status.recoveries.is_empty(), || {
        format!("nothing restored: {:?}", status.recoveries)
    })?;
    let tally = v.tally(&c).await? + w.tally(&c).await?;
    let recovery = fault.elapsed();
    Ok(Outcome { tally, recovery })
}

/// A store that fails (a file stands where the master's and the partitions' folders were) is
/// shown in the status; a master restarted, once the store works again, on the state saved
/// before it failed refuses changes and the newer data stays; restarted once more on the same
/// state (as its refusal once advised), it still refuses, and restores nothing.
pub async fn failing_store(lab: &Lab) -> Result<Outcome> {
    let bind = free_addr()?;
    let mut first = lab.snapshotting_master(&bind, "10", "0.2")?;
    let _servers = lab.servers(&bind, 2)?;
    let c = connect(&bind).await?;
    let mut probe = Probe::filled(&c, "w").await?;
    let aside = |part: &str| lab.dir().join(format!("{part}.aside"));
    for part in ["master", "partitions"] {
        std::fs::rename(lab.dir().join(part), aside(part))?;
        std::fs::write(lab.dir().join(part), "in the way")?;
    }
    probe.add(&c, 1.0).await?;
    // A snapshot the store cannot take fails at once, naming the store (it once retried for a
    // minute, then advised setting ANGEL_TLS_CA).
    let asked = Instant::now();
    let said = match c.snapshot().await {
        Ok(reply) => format!("a snapshot taken: {reply:?}"),
        Err(e) => e.to_string(),
    };
    ensure(
        said.contains("snapshot storage cannot be written")
            && !said.contains("TLS")
            && asked.elapsed() < Duration::from_secs(10),
        || format!("after {:?}: {said}", asked.elapsed()),
    )?;
    // A server joining changes the master's state, which it cannot save.
    let _third = lab.servers(&bind, 1)?;
    let failing = |s: &StatusReply| {
        !s.state_error.is_empty() && s.servers.iter().any(|s| !s.snapshot_error.is_empty())
    };
    let status = wait_for(&c, failing, NOTICE).await?;
    let shown = angel_runner::status::render(&status);
    ensure(
        shown.contains("THE MASTER CANNOT SAVE ITS STATE") && shown.contains("SNAPSHOTS FAIL"),
        || format!("the status page hides the failures:\n{shown}"),
    )?;
    // A restarted master doubts its state once a server it knew saw an epoch it did not save
    // (the joining server is new to it): until a heartbeat carries the epoch, that state is
    // still the service's newest.
    let unsaved = status.map.as_ref().map_or(0, |m| m.epoch);
    let seen = |s: &StatusReply| {
        let holding = |s: &&ServerStatus| !s.partitions.is_empty();
        s.servers
            .iter()
            .filter(holding)
            .any(|s| s.seen_epoch >= unsaved)
    };
    wait_for(&c, seen, NOTICE).await?;

    first.kill();
    for part in ["master", "partitions"] {
        std::fs::remove_file(lab.dir().join(part))?;
        std::fs::rename(aside(part), lab.dir().join(part))?;
    }
    let fault = Instant::now();
    let mut again = lab.snapshotting_master(&bind, "10", "0.2")?;
    let status = wait_for(&c, |s| !s.doubt.is_empty(), NOTICE).await?;
    ensure(status.doubt.contains("newer than the saved state"), || {
        status.doubt.clone()
    })?;
    again.kill();
    let _third = lab.snapshotting_master(&bind, "10", "0.2")?;
    let status = wait_for(&c, |s| !s.doubt.is_empty(), NOTICE).await?;
    ensure(status.doubt.contains("found by an earlier run"), || {
        format!("a second restart on the stale state: {}", status.doubt)
    })?;
    ensure(status.recoveries.is_empty(), || {
        format!("restored over live data: {:?}", status.recoveries)
    })?;
    let tally = probe.tally(&c).await?;
    Ok(Outcome {
        tally,
        recovery: fault.elapsed(),
    })
}
