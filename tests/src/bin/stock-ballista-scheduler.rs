//! A Ballista scheduler as the stock `ballista-scheduler` binary runs it: default session,
//! default codecs, none of the angel-ps functions. Tests submit jobs to it to check that the
//! error names the missing function. Prints `... listening on df://ADDR`, runs until killed.

use std::sync::Arc;

use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let config = Arc::new(SchedulerConfig {
        bind_port: addr.port(),
        ..SchedulerConfig::default()
    });
    let cluster = BallistaCluster::new_from_config(&config).await?;
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, config).await?;
    println!("stock ballista scheduler listening on df://{addr}");
    start_grpc_service_with_listener(listener, scheduler).await?;
    Ok(())
}
