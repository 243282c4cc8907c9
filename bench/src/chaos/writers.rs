//! Changes whose writer cannot replay them: a server killed after its writer left, and a
//! writer whose replay buffer filled. Snapshots asked for at the job's end, or when the
//! buffer fills, keep them.

use std::time::Instant;

use angel_client::ClientConfig;

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

    servers[1].kill();
    let fault = Instant::now();
    let reader = connect(&bind).await?;
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
