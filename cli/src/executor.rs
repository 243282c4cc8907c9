//! `angel-ps executor`: a Ballista executor, started as a library, whose function registry
//! and plan codecs hold every angel-ps function. Tasks of any job find their PS master in the
//! plan, so an executor is started once, without per-job flags; its tasks share one PS client
//! per master. Each task's plan names the changes its PS aggregates send after the job, stage
//! and partition ([`angel_sql::ballista::task_names`]), so a task run again is not applied twice.

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;

use angel_sql::ballista::stage_write::number_partitions;
use angel_sql::ballista::{AngelLogicalCodec, AngelPhysicalCodec, name_tasks, run_of};
use angel_sql::binding::Binding;
use angel_sql::object_stores::runtime_env;
use ballista_core::JobId;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_executor::execution_engine::{
    DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor,
};
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use clap::Args;
use datafusion::common::Result as DfResult;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;

/// Flags of `angel-ps executor`.
#[derive(Debug, Args)]
pub struct ExecutorArgs {
    /// The scheduler's host:port (what `angel-ps scheduler` listens on).
    #[arg(long, env = "ANGEL_SCHEDULER", default_value = "127.0.0.1:50050")]
    pub scheduler: String,
    /// Local address the executor's services listen on.
    #[arg(long, env = "ANGEL_EXECUTOR_BIND_HOST", default_value = "127.0.0.1")]
    pub bind_host: String,
    /// Host name other executors and clients use to fetch results, when it differs.
    #[arg(long, env = "ANGEL_EXECUTOR_EXTERNAL_HOST")]
    pub external_host: Option<String>,
    /// Arrow Flight port (other executors and the client fetch partitions here).
    #[arg(long, default_value_t = 50051)]
    pub flight_port: u16,
    /// gRPC port (the scheduler pushes tasks here).
    #[arg(long, default_value_t = 50052)]
    pub grpc_port: u16,
    /// Tasks run at once; 0 = one per core.
    #[arg(long, default_value_t = 0)]
    pub concurrent_tasks: usize,
    /// Directory for shuffle files; default: a fresh temporary directory.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Seconds between heartbeats to the scheduler.
    #[arg(long, default_value_t = 5)]
    pub heartbeat_secs: u64,
}

/// Ballista's functions, DataFusion's array functions (`make_array` builds feature lists; the
/// stock registry lacks them) and every angel-ps function, unbound: plans bring each PS
/// function's master address.
fn registry() -> BallistaFunctionRegistry {
    let mut registry = BallistaFunctionRegistry::default();
    let nested = datafusion::functions_nested::all_default_nested_functions();
    let ours = angel_sql::scalar_functions(&Binding::default())
        .into_iter()
        .map(Arc::new);
    for f in nested.into_iter().chain(ours) {
        for name in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
            registry
                .scalar_functions
                .insert(name.to_string(), f.clone());
        }
    }
    for f in angel_sql::aggregate_functions(&Binding::default()) {
        registry
            .aggregate_functions
            .insert(f.name().to_string(), Arc::new(f));
    }
    registry
}

/// Runs the executor until Ctrl-C / SIGTERM or the scheduler stops it.
pub async fn run(args: ExecutorArgs) -> Result<(), Box<dyn Error>> {
    let (host, port) = args
        .scheduler
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
        .ok_or_else(|| format!("--scheduler '{}' is not host:port", args.scheduler))?;
    let defaults = ExecutorProcessConfig::default();
    let work_dir = args.work_dir.map(|d| d.display().to_string());
    let temp_dir = work_dir.clone();
    let config = ExecutorProcessConfig {
        bind_host: args.bind_host,
        external_host: args.external_host,
        port: args.flight_port,
        grpc_port: args.grpc_port,
        scheduler_host: host,
        scheduler_port: port,
        scheduler_connect_timeout_seconds: 10,
        vcores: match args.concurrent_tasks {
            0 => defaults.vcores,
            n => n,
        },
        work_dir,
        print_thread_info: false,
        executor_heartbeat_interval_seconds: args.heartbeat_secs.max(1),
        override_function_registry: Some(Arc::new(registry())),
        // Object stores for s3:// and hdfs:// stages and tables, from this process's
        // environment.
        override_runtime_producer: Some(Arc::new(move |_: &SessionConfig| {
            runtime_env(temp_dir.as_deref(), None)
        })),
        override_execution_engine: Some(Arc::new(NamingEngine(DefaultExecutionEngine::new()))),
        override_logical_codec: Some(Arc::new(AngelLogicalCodec::default())),
        override_physical_codec: Some(Arc::new(AngelPhysicalCodec::default())),
        ..defaults
    };
    println!(
        "angel-ps executor {} ({} task slots, grpc port {}, scheduler {}) listening on {}:{}",
        config.executor_id,
        config.vcores,
        config.grpc_port,
        args.scheduler,
        config.bind_host,
        config.port
    );
    start_executor_process(Arc::new(config)).await?;
    eprintln!("angel-ps executor stopped");
    Ok(())
}

/// Ballista's execution engine, with each task's PS aggregates named after its run (its job,
/// or the client's token for a job submitted again), stage and partitions first, and its
/// stage writers told the partitions' global numbers. (Ballista's default also pools Flight clients for shuffle reads; its
/// pool type is private, so shuffle reads here open their own connections.)
struct NamingEngine(DefaultExecutionEngine);

impl ExecutionEngine for NamingEngine {
    fn create_query_stage_exec(
        &self,
        job_id: JobId,
        stage_id: usize,
        task_id: usize,
        global_output_partition_ids: Vec<usize>,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> DfResult<Arc<dyn QueryStageExecutor>> {
        let run = run_of(job_id.as_ref(), config);
        let plan = name_tasks(plan, run, stage_id, &global_output_partition_ids)?;
        let plan = number_partitions(plan, &global_output_partition_ids)?;
        self.0.create_query_stage_exec(
            job_id,
            stage_id,
            task_id,
            global_output_partition_ids,
            plan,
            work_dir,
            config,
        )
    }
}
