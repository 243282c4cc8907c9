//! A minimal reproduction of the Ballista 55 scheduler bug that `angel-ps scheduler`'s stall
//! watchdog and the client's resubmission work around (docs/cluster.md, "A job Ballista's
//! scheduler stops scheduling"). No angel-ps code takes part beyond the executor processes
//! (`angel-ps executor` is Ballista's executor as a library; a plain query calls none of our
//! functions): a stock scheduler in this process (Ballista's defaults, dead executors noticed
//! after 3 s), two executors of one task slot, and a plain two-stage query (a `GROUP BY` over
//! 8 CSV files). Once the first stage has succeeded and the second runs, one executor is
//! SIGKILLed. The scheduler resets the dead executor's finished tasks, rolls the first stage
//! back to running with those tasks waiting, and never offers them to the executor left: the
//! job has tasks waiting and none running, the surviving executor sits idle, and the query
//! never returns.
//!
//! `cargo run -p angel-tests --bin ballista-stall-repro -- [RUNS]` (default 10) prints each
//! run's outcome (finished with the right rows, failed, stalled) and their counts. A run is
//! stalled when its job ran no task for 20 s; a run takes a few seconds otherwise. It runs the
//! `angel-ps` binary beside this one (`cargo build --workspace` builds both), or
//! `$ANGEL_PS_BIN`.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_local_cluster::executor;
use ballista::prelude::SessionContextExt;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use ballista_scheduler::scheduler_server::SchedulerServer;
use ballista_scheduler::state::execution_stage::ExecutionStage;
use datafusion::prelude::{CsvReadOptions, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

type Scheduler = SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;
type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// The query: a partial aggregate per file, then a final one per hash partition.
const QUERY: &str = "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k";
/// The CSV files (the first stage's tasks) and their rows.
const FILES: u64 = 8;
const ROWS_PER_FILE: u64 = 250_000;
/// Distinct keys: many, so the final stage has work to do while the executor is killed.
const KEYS: u64 = 1_000_000;
/// How long a job may run no task (with a stage not done) before the run counts as stalled.
const STALLED_AFTER: Duration = Duration::from_secs(20);
/// How long a run may take in all.
const LIMIT: Duration = Duration::from_secs(120);

/// How one run ended.
enum Outcome {
    /// The query returned every key once.
    Finished,
    /// The query returned, with the wrong number of keys.
    Wrong(usize),
    /// The query failed.
    Failed(String),
    /// The job stopped moving; its stages then.
    Stalled(String),
    /// The query ended before a stage succeeded with a later one running: nothing was killed.
    Missed,
}

impl Outcome {
    fn kind(&self) -> &'static str {
        match self {
            Outcome::Finished => "finished",
            Outcome::Wrong(_) => "wrong",
            Outcome::Failed(_) => "failed",
            Outcome::Stalled(_) => "stalled",
            Outcome::Missed => "missed",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Outcome::Finished => write!(f, "finished: {KEYS} keys"),
            Outcome::Wrong(n) => write!(f, "wrong: {n} keys of {KEYS}"),
            Outcome::Failed(e) => write!(f, "failed: {e}"),
            Outcome::Stalled(stages) => write!(f, "stalled: {stages}"),
            Outcome::Missed => write!(f, "missed: the query ended before the kill"),
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let runs: u32 = match std::env::args().nth(1) {
        Some(arg) => (arg.parse()).map_err(|e| format!("RUNS '{arg}': {e}"))?,
        None => 10,
    };
    let binary = std::env::var_os("ANGEL_PS_BIN").map_or_else(
        || std::env::current_exe().map(|e| e.with_file_name("angel-ps")),
        |p| Ok(PathBuf::from(p)),
    )?;
    let data = tempfile::tempdir()?;
    write_files(data.path())?;
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for run in 1..=runs {
        let outcome = attempt(&binary, data.path()).await?;
        println!("run {run}: {outcome}");
        *counts.entry(outcome.kind()).or_default() += 1;
    }
    let counted: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!("{runs} runs: {}", counted.join(", "));
    Ok(())
}

/// Writes the CSV files: key `i * 7919 mod KEYS` and value `i` on row `i`.
fn write_files(dir: &Path) -> Result<()> {
    for file in 0..FILES {
        let mut out = BufWriter::new(std::fs::File::create(dir.join(format!("{file}.csv")))?);
        writeln!(out, "k,v")?;
        for i in file * ROWS_PER_FILE..(file + 1) * ROWS_PER_FILE {
            writeln!(out, "{},{i}", i * 7919 % KEYS)?;
        }
    }
    Ok(())
}

/// One run: a fresh scheduler and two executors, the query, an executor killed once a stage
/// has succeeded and a later one runs, and the query's end (or its stall).
async fn attempt(binary: &Path, data: &Path) -> Result<Outcome> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let config = Arc::new(SchedulerConfig {
        bind_port: addr.port(),
        // Dead executors are noticed within seconds, as `angel-ps scheduler` is told to in
        // the test that met the bug.
        executor_timeout_seconds: 3,
        expire_dead_executor_interval_seconds: 1,
        ..SchedulerConfig::default()
    });
    let cluster = BallistaCluster::new_from_config(&config).await?;
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, config).await?;
    let server = tokio::spawn(start_grpc_service_with_listener(
        listener,
        scheduler.clone(),
    ));
    let scheduler_addr = addr.to_string();
    let mut executors = (0..2)
        .map(|_| executor(binary, &scheduler_addr, 1, &[]))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let ctx = SessionContext::remote(&format!("df://{addr}")).await?;
    let files = format!("{}/", data.display());
    ctx.register_csv("t", &files, CsvReadOptions::new()).await?;
    let query = tokio::spawn(async move {
        let batches = ctx.sql(QUERY).await?.collect().await?;
        Ok::<_, datafusion::error::DataFusionError>(batches.iter().map(|b| b.num_rows()).sum())
    });
    let started = Instant::now();
    let outcome = loop {
        if query.is_finished() {
            break Some(Outcome::Missed);
        }
        if stages(&scheduler).await.is_some_and(|s| {
            s.iter().any(|(_, state)| *state == "successful")
                && s.iter().any(|(_, state)| *state == "running")
        }) {
            executors[1].kill();
            break None;
        }
        if started.elapsed() > LIMIT {
            break Some(Outcome::Failed("no stage succeeded".into()));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let outcome = match outcome {
        Some(outcome) => outcome,
        None => after_the_kill(&scheduler, query, started).await?,
    };
    server.abort();
    Ok(outcome)
}

/// Waits for the query to end, or for its job to stop moving for [`STALLED_AFTER`].
async fn after_the_kill(
    scheduler: &Scheduler,
    query: tokio::task::JoinHandle<datafusion::error::Result<usize>>,
    started: Instant,
) -> Result<Outcome> {
    let mut idle_since: Option<Instant> = None;
    loop {
        if query.is_finished() {
            return Ok(match query.await? {
                Ok(rows) if rows as u64 == KEYS => Outcome::Finished,
                Ok(rows) => Outcome::Wrong(rows),
                Err(e) => Outcome::Failed(e.to_string().lines().next().unwrap_or("").into()),
            });
        }
        let waiting = stalled(scheduler).await;
        idle_since = match (waiting, idle_since) {
            (None, _) => None,
            (Some(_), None) => Some(Instant::now()),
            (Some(_), since) => since,
        };
        if let Some(since) = idle_since.filter(|s| s.elapsed() >= STALLED_AFTER) {
            query.abort();
            let described = (stages(scheduler).await.unwrap_or_default().iter())
                .map(|(id, state)| format!("stage {id} {state}"))
                .collect::<Vec<_>>()
                .join(", ");
            let idle = since.elapsed().as_secs();
            let waiting = waiting.unwrap_or(0);
            return Ok(Outcome::Stalled(format!(
                "{described}; {waiting} tasks waiting, none running for {idle} s"
            )));
        }
        if started.elapsed() > LIMIT {
            query.abort();
            return Ok(Outcome::Failed(format!("still running after {LIMIT:?}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The running job's stages (id, state), ordered by id; `None` without a running job.
async fn stages(scheduler: &Scheduler) -> Option<Vec<(usize, &'static str)>> {
    let jobs = scheduler.state.task_manager.get_running_job_cache();
    let info = jobs.iter().next()?.1.clone();
    let graph = info.execution_graph.read().await;
    let mut stages: Vec<(usize, &'static str)> = (graph.stages().iter())
        .map(|(id, stage)| {
            let state = match stage {
                ExecutionStage::UnResolved(_) => "unresolved",
                ExecutionStage::Resolved(_) => "resolved",
                ExecutionStage::Running(_) => "running",
                ExecutionStage::Successful(_) => "successful",
                ExecutionStage::Failed(_) => "failed",
            };
            (*id, state)
        })
        .collect();
    stages.sort_unstable();
    Some(stages)
}

/// The tasks of the running job waiting for a slot, if it has a stage not done and no task
/// running (the surviving executor's slot is free then: this is the only job).
async fn stalled(scheduler: &Scheduler) -> Option<usize> {
    let jobs = scheduler.state.task_manager.get_running_job_cache();
    let info = jobs.iter().next().map(|j| j.1.clone())?;
    let graph = info.execution_graph.read().await;
    let undone = |s: &ExecutionStage| !matches!(s, ExecutionStage::Successful(_));
    let idle = !graph.is_successful()
        && graph.stages().values().any(undone)
        && graph.running_tasks().is_empty();
    idle.then(|| graph.available_tasks())
}
