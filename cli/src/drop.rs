//! `angel-ps drop NAMESPACE`: removes every matrix and counter of a namespace from a running
//! service: what a killed job left behind (a job's models outlive it on purpose, so nothing
//! removes them by itself).

use angel_client::{PsClient, PsError, Result};
use angel_proto::namespace;
use clap::Args;

use angel_runner::client_access::ClientAccess;

/// Flags of `angel-ps drop`.
#[derive(Debug, Args)]
pub struct DropArgs {
    /// Master address (host:port).
    #[arg(long, env = "ANGEL_MASTER")]
    pub master: String,
    /// The namespace whose matrices and counters go (`NAMESPACE/name` on the service).
    pub namespace: String,
    /// The service token or the namespace's token, and the CA of the service's TLS.
    #[command(flatten)]
    pub access: ClientAccess,
}

/// Drops the namespace's matrices and counters and prints how many.
pub async fn run(args: DropArgs) -> Result<()> {
    namespace::check(&args.namespace, "the namespace to drop")?;
    let client = PsClient::connect_with(&args.master, args.access.config()?).await?;
    let status = client.status().await?;
    // A token limited to other namespaces sees none of this one's names: say so, rather than
    // report that there was nothing to drop.
    if !(status.namespaces.is_empty() || status.namespaces.contains(&args.namespace)) {
        return Err(PsError::PermissionDenied(format!(
            "the token is limited to the namespaces {}; it cannot drop namespace '{}'",
            status.namespaces.join(", "),
            args.namespace
        )));
    }
    let map = status.map.unwrap_or_default();
    let prefix = format!("{}/", args.namespace);
    let ours = |name: &&String| name.starts_with(&prefix);
    let matrices: Vec<String> = map.matrices.into_iter().map(|m| m.name).collect();
    let counters: Vec<String> = map.counters.into_iter().map(|c| c.name).collect();
    let (matrices, counters): (Vec<&String>, Vec<&String>) = (
        matrices.iter().filter(ours).collect(),
        counters.iter().filter(ours).collect(),
    );
    for name in &matrices {
        client.drop_matrix(name).await?;
    }
    for name in &counters {
        client.drop_counter(name).await?;
    }
    println!(
        "namespace {}: dropped {} matrices and {} counters",
        args.namespace,
        matrices.len(),
        counters.len()
    );
    Ok(())
}
