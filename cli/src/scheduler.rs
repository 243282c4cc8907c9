//! `angel-ps scheduler`: a Ballista scheduler, started as a library, that knows every angel-ps
//! function. Stock `ballista-scheduler` binaries cannot plan our jobs: only a function's name
//! and bytes cross the network, so the code must be in the scheduler.

use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use angel_proto::ballista_slots_server::BallistaSlotsServer;
use angel_sql::ballista::{AngelLogicalCodec, AngelPhysicalCodec, AngelQueryPlanner};
use angel_sql::binding::Binding;
use angel_sql::object_stores::runtime_env;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use ballista_core::utils::default_session_builder;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::{SchedulerConfig, TaskDistributionPolicy};
use ballista_scheduler::scheduler_process::create_scheduler;
use clap::Args;
use datafusion::common::Result as DfResult;
use datafusion::execution::{FunctionRegistry, SessionState, SessionStateBuilder};
use datafusion::prelude::SessionConfig;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use tokio_util::sync::CancellationToken;
use tonic::service::RoutesBuilder;

use angel_ps_service::net;

use crate::cluster_slots::ClusterSlots;
use crate::{executor_probe, stall_watchdog};

/// Flags of `angel-ps scheduler`.
#[derive(Debug, Args)]
pub struct SchedulerArgs {
    /// Address to listen on (port 0 picks a free port). Clients use `df://HOST:PORT`.
    #[arg(long, env = "ANGEL_SCHEDULER_BIND", default_value = "127.0.0.1:50050")]
    pub bind: SocketAddr,
    /// Host name executors and clients use for this scheduler, when it differs from --bind.
    #[arg(long, env = "ANGEL_SCHEDULER_EXTERNAL_HOST")]
    pub external_host: Option<String>,
    /// Seconds without a heartbeat after which an executor is declared dead and its tasks
    /// are run again elsewhere.
    #[arg(long, default_value_t = 30)]
    pub executor_timeout_secs: u64,
    /// Times a task may fail (for example with its executor) before the job fails.
    #[arg(long, default_value_t = 4)]
    pub task_max_failures: usize,
    /// Seconds a running job may run no task (with none waiting, or the cluster idle) before it
    /// is cancelled as stalled, so its client runs it again (0: never); see `stall_watchdog`.
    #[arg(long, default_value_t = 30)]
    pub stall_secs: u64,
}

/// A scheduler session: Ballista's defaults plus every angel-ps function, with angel-ps's
/// object stores (s3:// and hdfs:// tables plan here) and planner (a staged `CREATE TABLE`'s
/// tasks write their own partitions: [`angel_sql::ballista::stage_write`]). The functions are
/// unbound here; plans bring each PS function's master address ([`angel_sql::ballista::codec`]).
fn session_with_functions(config: SessionConfig) -> DfResult<SessionState> {
    let state = default_session_builder(config)?;
    let mut state = SessionStateBuilder::new_from_existing(state)
        .with_runtime_env(runtime_env(None, None)?)
        .with_query_planner(Arc::new(AngelQueryPlanner))
        .build();
    for f in angel_sql::scalar_functions(&Binding::default()) {
        state.register_udf(Arc::new(f))?;
    }
    for f in angel_sql::aggregate_functions(&Binding::default()) {
        state.register_udaf(Arc::new(f))?;
    }
    Ok(state)
}

/// Runs the scheduler until Ctrl-C / SIGTERM; prints `... listening on df://ADDR` when ready.
pub async fn run(args: SchedulerArgs) -> Result<(), Box<dyn Error>> {
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| format!("scheduler cannot listen on {}: {e}", args.bind))?;
    let addr = listener.local_addr()?;
    let config = SchedulerConfig {
        bind_host: addr.ip().to_string(),
        bind_port: addr.port(),
        external_host: args.external_host.unwrap_or_else(|| addr.ip().to_string()),
        // Spread tasks over executors: PS work is network-bound per process, and every
        // executor should share the pushes.
        task_distribution: TaskDistributionPolicy::RoundRobin,
        executor_timeout_seconds: args.executor_timeout_secs,
        // Checked a few times per timeout, so a dead executor's tasks run again soon after.
        expire_dead_executor_interval_seconds: (args.executor_timeout_secs / 3).clamp(1, 15),
        task_max_failures: args.task_max_failures,
        override_session_builder: Some(Arc::new(session_with_functions)),
        override_logical_codec: Some(Arc::new(AngelLogicalCodec::default())),
        override_physical_codec: Some(Arc::new(AngelPhysicalCodec::default())),
        ..SchedulerConfig::default()
    };
    let config = Arc::new(config);
    let cluster = BallistaCluster::new_from_config(&config).await?;
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, config).await?;
    let shutdown = CancellationToken::new();
    net::cancel_on_signal(shutdown.clone());
    if args.stall_secs > 0 {
        let bound = Duration::from_secs(args.stall_secs);
        tokio::spawn(stall_watchdog::watch(
            scheduler.clone(),
            bound,
            shutdown.clone(),
        ));
    }
    tokio::spawn(executor_probe::watch(scheduler.clone(), shutdown.clone()));
    println!("angel-ps scheduler listening on df://{addr}");
    let timeout = Duration::from_secs(args.executor_timeout_secs);
    serve(listener, scheduler, timeout, shutdown.clone()).await?;
    if shutdown.is_cancelled() {
        eprintln!("angel-ps scheduler stopped");
    }
    Ok(())
}

/// Serves Ballista's scheduler service and ours ([`ClusterSlots`]) on `listener` until
/// `shutdown`. (Ballista's own server adds a REST API and health routes, both off in our
/// build, and a Flight proxy, off by default.)
async fn serve(
    listener: tokio::net::TcpListener,
    scheduler: stall_watchdog::Scheduler,
    executor_timeout: Duration,
    shutdown: CancellationToken,
) -> Result<(), Box<dyn Error>> {
    let config = scheduler.state.config.clone();
    let ballista = SchedulerGrpcServer::new(scheduler.clone())
        .max_encoding_message_size(config.grpc_server_max_encoding_message_size as usize)
        .max_decoding_message_size(config.grpc_server_max_decoding_message_size as usize);
    let slots = BallistaSlotsServer::new(ClusterSlots::new(scheduler, executor_timeout));
    let mut routes = RoutesBuilder::default();
    routes.add_service(ballista).add_service(slots);
    // Ballista's service reads the caller's address (an executor's host) from axum's
    // connection info.
    let service =
        (routes.routes().into_axum_router()).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
}
