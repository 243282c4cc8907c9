//! `angel-ps snapshot`: every server writes the partitions that changed since their last
//! snapshot, now, and the command prints what was written.

use angel_client::{PsClient, Result};
use clap::Args;

use angel_runner::client_access::ClientAccess;

/// Flags of `angel-ps snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Master address (host:port).
    #[arg(long, env = "ANGEL_MASTER")]
    pub master: String,
    /// The CA of the service's TLS.
    #[command(flatten)]
    pub access: ClientAccess,
}

/// Asks the master for a snapshot and prints its summary.
pub async fn run(args: SnapshotArgs) -> Result<()> {
    let client = PsClient::connect_with(&args.master, args.access.config()?).await?;
    let reply = client.snapshot().await?;
    println!(
        "snapshot: {} partitions, {} bytes in {} ms (longest pause of pushes {:.2} ms)",
        reply.partitions,
        reply.bytes,
        reply.millis,
        reply.max_pause_us as f64 / 1e3
    );
    Ok(())
}
