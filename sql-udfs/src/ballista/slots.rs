//! The cluster's live task slots, asked of `angel-ps scheduler` (the `Cluster` service it
//! serves beside Ballista's on the same port), so a job's default parallelism is what the
//! executors alive can run at once.

use std::time::Duration;

use angel_proto::SlotsRequest;
use angel_proto::ballista_slots_client::BallistaSlotsClient;
use datafusion::common::{DataFusionError, Result};

/// How long the question may take: a scheduler that does not answer has no slots to give.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The executors alive at the scheduler at `url` (`df://host:port`) and their task slots;
/// an error when it cannot say (unreachable, or a stock Ballista scheduler without the
/// service).
pub async fn live_slots(url: &str) -> Result<(u32, u32)> {
    let address = url.strip_prefix("df://").unwrap_or(url);
    let error = |e: String| {
        DataFusionError::Execution(format!("task slots of the scheduler at {url}: {e}"))
    };
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .map_err(|e| error(e.to_string()))?
        .connect_timeout(TIMEOUT)
        .timeout(TIMEOUT);
    let channel = endpoint.connect().await.map_err(|e| error(e.to_string()))?;
    let reply = BallistaSlotsClient::new(channel)
        .slots(SlotsRequest {})
        .await
        .map_err(|e| error(e.message().to_string()))?
        .into_inner();
    Ok((reply.executors, reply.slots))
}
