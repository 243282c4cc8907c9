//! `angel-ps run job.sql`: runs a SQL job file on embedded DataFusion, against an embedded
//! service (started in this process) or, with `--master`, a running one; with `--ballista`
//! the same file runs on a Ballista cluster whose executors talk to the service at
//! `--master`. Prints each statement's result, then a summary of where the time went and of
//! skipped input rows.

use std::collections::HashMap;
use std::error::Error;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use angel_client::{ClientConfig, PsClient};
use angel_proto::namespace;
use angel_sql::ballista::Stage;
use angel_sql::job::{Job, StatementReport};
use angel_sql::object_stores::runtime_env;
use angel_sql::storage_level::{StorageLevel, TableStorage};
use bytesize::ByteSize;
use comfy_table::Table;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::{SessionConfig, SessionContext};

use angel_ps_service::standalone::{Standalone, StandaloneConfig};

use crate::client_access::ClientAccess;
use crate::output::{self, Output};

/// Rows of a statement's result printed in full.
const SHOW_ROWS: usize = 20;

/// Flags of `angel-ps run`.
#[derive(Debug)]
#[cfg_attr(feature = "flags", derive(clap::Args))]
pub struct RunOptions {
    /// The SQL job file.
    pub file: PathBuf,
    /// A value for `${name}` in the file, as name=value; repeat for more.
    #[cfg_attr(feature = "flags", arg(long = "var", value_parser = parse_var))]
    pub vars: Vec<(String, String)>,
    /// Master of a running service; without it the job starts an embedded one.
    #[cfg_attr(feature = "flags", arg(long, env = "ANGEL_MASTER"))]
    pub master: Option<String>,
    /// With --master: the namespace the job's matrices and counters are named in on the
    /// service (`NAMESPACE/name`); jobs in other namespaces do not see them unless they name
    /// them so. Default: a fresh one, the file's name and 8 random hex digits.
    #[cfg_attr(feature = "flags", arg(long, env = "ANGEL_NAMESPACE"))]
    pub namespace: Option<String>,
    /// Servers of the embedded service.
    #[cfg_attr(feature = "flags", arg(long, default_value_t = 2))]
    pub servers: usize,
    /// Partitions DataFusion plans for (parallel tasks); 0 = one per core (on a cluster: the
    /// executors' task slots, from `angel-ps scheduler`; 4 if it cannot say).
    #[cfg_attr(feature = "flags", arg(long, default_value_t = 0))]
    pub partitions: usize,
    /// Run on the Ballista scheduler at this URL (`df://HOST:PORT`, started with `angel-ps
    /// scheduler`); needs --master.
    #[cfg_attr(feature = "flags", arg(long, env = "ANGEL_BALLISTA"))]
    pub ballista: Option<String>,
    /// With --ballista: where the job's tables are kept as Parquet, a path or URL every
    /// executor reaches by the same name (`s3://bucket/stage`, `hdfs://nn:8020/stage`, or a
    /// shared mount). Default: a temporary directory on this machine, removed after.
    #[cfg_attr(feature = "flags", arg(long))]
    pub stage: Option<String>,
    /// Serve the embedded service's status page and Prometheus `/metrics` over HTTP on this
    /// address while the job runs (port 0 picks a free port); the URL goes to stderr.
    #[cfg_attr(feature = "flags", arg(long, value_name = "ADDR"))]
    pub http: Option<SocketAddr>,
    /// How the job uses memory.
    #[cfg_attr(feature = "flags", command(flatten))]
    pub memory: MemoryOptions,
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[cfg_attr(feature = "flags", arg(long, value_enum, default_value_t))]
    pub output: Output,
    /// With --master: the CA of the service's TLS (executors read ANGEL_TLS_CA).
    #[cfg_attr(feature = "flags", command(flatten))]
    pub access: ClientAccess,
}

impl RunOptions {
    /// A job named `file` on an embedded service of two servers, with `partitions` target
    /// partitions and every other flag at its default (the benchmarks' and example tests' jobs).
    pub fn embedded(file: impl Into<PathBuf>, partitions: usize) -> Self {
        RunOptions {
            file: file.into(),
            vars: Vec::new(),
            master: None,
            namespace: None,
            servers: 2,
            partitions,
            ballista: None,
            stage: None,
            http: None,
            memory: Default::default(),
            output: Default::default(),
            access: Default::default(),
        }
    }
}

/// Flags of how a job on one machine uses memory (`run`, `demo`, `bench scale`).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "flags", derive(clap::Args))]
pub struct MemoryOptions {
    /// The job's memory budget, such as 2GB or 512MiB: DataFusion's operators share it and
    /// spill beyond it, and the tables the job creates keep at most half of it in memory,
    /// the rest on local disk as Arrow IPC (in the temporary directory, TMPDIR). Default:
    /// no limit.
    #[cfg_attr(feature = "flags", arg(long, value_name = "SIZE"))]
    pub memory_limit: Option<ByteSize>,
    /// Where the tables the job creates are kept: memory, disk or memory-and-disk. Default:
    /// memory-and-disk with --memory-limit, memory without.
    #[cfg_attr(feature = "flags", arg(long, value_name = "LEVEL"))]
    pub storage_level: Option<StorageLevel>,
}

impl MemoryOptions {
    /// The limit in bytes.
    fn limit(&self) -> Option<usize> {
        self.memory_limit.map(|size| size.as_u64() as usize)
    }
}

/// Target partitions of a cluster job when --partitions is 0 and the scheduler cannot say
/// how many task slots its executors have.
const CLUSTER_PARTITIONS: usize = 4;

/// Target partitions of a cluster job when --partitions is 0: the task slots of the executors
/// alive at the scheduler at `url` (so models' default `workers` all run at once), else
/// [`CLUSTER_PARTITIONS`].
async fn cluster_partitions(url: &str) -> usize {
    match angel_sql::ballista::live_slots(url).await {
        Ok((executors, slots)) if slots > 0 => {
            tracing::info!("{executors} executors with {slots} task slots: {slots} partitions");
            slots as usize
        }
        Ok(_) => {
            tracing::warn!(
                "no executor is registered at {url} yet; planning for {CLUSTER_PARTITIONS} \
                 partitions (set --partitions)"
            );
            CLUSTER_PARTITIONS
        }
        Err(e) => {
            tracing::info!("{e}; planning for {CLUSTER_PARTITIONS} partitions");
            CLUSTER_PARTITIONS
        }
    }
}

#[cfg(feature = "flags")]
fn parse_var(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .ok_or_else(|| format!("'{s}' is not name=value"))
}

/// Runs the job and prints its results and summary.
pub async fn run(args: RunOptions) -> Result<(), Box<dyn Error>> {
    match args.output {
        Output::Text => print_summary(&run_job(&args, print_report).await?),
        Output::Json => output::print(&output::summary_line(
            &run_job(&args, output::print_report).await?,
        )),
    }
    Ok(())
}

/// Runs the job file of `args`; see [`run_text`].
pub async fn run_job(
    args: &RunOptions,
    each: impl FnMut(&StatementReport),
) -> Result<Vec<StatementReport>, Box<dyn Error>> {
    let text = read_job(&args.file)?;
    run_text(args, &text, each).await
}

/// Most bytes a job file may hold: its statements, never its data.
const MAX_JOB_BYTES: u64 = 64 << 20;

/// The text of job file `path`, refused past [`MAX_JOB_BYTES`] before it is read whole.
fn read_job(path: &std::path::Path) -> Result<String, Box<dyn Error>> {
    use std::io::Read;
    let cannot = |e: std::io::Error| format!("cannot read job file {}: {e}", path.display());
    let mut text = String::new();
    (std::fs::File::open(path)
        .map_err(cannot)?
        .take(MAX_JOB_BYTES + 1))
    .read_to_string(&mut text)
    .map_err(cannot)?;
    if text.len() as u64 > MAX_JOB_BYTES {
        return Err(format!(
            "job file {} holds more than the {MAX_JOB_BYTES} bytes a job file may hold; put \
             its data in files the job reads",
            path.display()
        )
        .into());
    }
    Ok(text)
}

/// Runs job `text` (named by `args.file` in errors) on a fresh session and, without
/// `--master`, a fresh embedded service that is stopped afterwards; calls `each` after
/// every statement.
pub async fn run_text(
    args: &RunOptions,
    text: &str,
    each: impl FnMut(&StatementReport),
) -> Result<Vec<StatementReport>, Box<dyn Error>> {
    let vars: HashMap<String, String> = args.vars.iter().cloned().collect();
    let file = args.file.display().to_string();
    if args.http.is_some() && args.master.is_some() {
        return Err(
            "--http serves the page of the service `run` embeds; with --master, give \
                    --http to `angel-ps master` instead"
                .into(),
        );
    }
    if let Some(url) = &args.ballista {
        let job = cluster_job(args, url).await?;
        return Ok(job.run(&file, text, &vars, each).await?);
    }
    let mut config = SessionConfig::new();
    if args.partitions > 0 {
        config = config.with_target_partitions(args.partitions);
    }
    let limit = args.memory.limit();
    let ctx = SessionContext::new_with_config_rt(config, runtime_env(None, limit)?);
    let tables = || TableStorage::new(args.memory.storage_level, limit);
    match &args.master {
        Some(master) => {
            let namespace = connect(args, master).await?;
            let job = Job::new(ctx, master)
                .in_namespace(&namespace)
                .keeping_tables(tables())?;
            Ok(job.run(&file, text, &vars, each).await?)
        }
        None => {
            let config = StandaloneConfig {
                http: args.http,
                ..StandaloneConfig::new(args.servers)
            };
            let service = Standalone::start(config).await?;
            // The service is this process's own, plain and open: the token and CA of the
            // environment are for other services.
            let plain = ClientConfig {
                token: None,
                trust: None,
                ..ClientConfig::from_env()?
            };
            PsClient::shared_with(&service.master_addr(), plain).await?;
            if let Some(addr) = service.http_addr() {
                eprintln!("status page and metrics on http://{addr}/");
            }
            let job = Job::new(ctx, &service.master_addr()).keeping_tables(tables());
            let result = match job {
                Ok(job) => job.run(&file, text, &vars, each).await,
                Err(e) => Err(e),
            };
            service.shutdown().await?;
            Ok(result?)
        }
    }
}

/// The job's namespace on a running service: `--namespace`, or a fresh one. Printed to
/// stderr, so a later job can name it.
fn namespace(args: &RunOptions) -> Result<String, Box<dyn Error>> {
    let namespace = match &args.namespace {
        Some(given) => given.clone(),
        None => {
            let stem = args.file.file_stem().and_then(|s| s.to_str());
            let stem: String = stem
                .unwrap_or("job")
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .take(namespace::MAX_LEN - 9)
                .collect();
            format!("{stem}-{:08x}", rand::random::<u32>())
        }
    };
    namespace::check(&namespace, &format!("--namespace '{namespace}'"))?;
    eprintln!(
        "namespace {namespace}: the job's matrices and counters are {namespace}/NAME on the service"
    );
    Ok(namespace)
}

/// A job on the Ballista cluster at `url`, after checking the PS master answers (executors
/// would otherwise fail one task at a time).
async fn cluster_job(args: &RunOptions, url: &str) -> Result<Job, Box<dyn Error>> {
    let master = args.master.as_deref().ok_or(
        "--ballista needs --master HOST:PORT: the executors train against a running PS service \
         (start one with `angel-ps standalone`, or `angel-ps master` and `angel-ps server`)",
    )?;
    let namespace = connect(args, master).await?;
    let partitions = match args.partitions {
        0 => cluster_partitions(url).await,
        n => n,
    };
    let ctx = angel_sql::ballista::connect(url, partitions).await?;
    let stage = match &args.stage {
        Some(dir) => Stage::at(dir)?,
        None => Stage::temporary()?,
    };
    Ok(Job::on_cluster(ctx, master, url, stage).in_namespace(&namespace))
}

/// Connects this process's client of the job's namespace to the service at `master` with
/// the command line's settings (the job's functions here share it), checking the master
/// answers; returns the namespace.
async fn connect(args: &RunOptions, master: &str) -> Result<String, Box<dyn Error>> {
    let config = ClientConfig {
        namespace: namespace(args)?,
        ..args.access.config()?
    };
    let namespace = config.namespace.clone();
    PsClient::shared_with(master, config)
        .await
        .map_err(|e| format!("PS master at {master}: {e}"))?;
    Ok(namespace)
}

/// Prints a statement's result, if it has one.
pub fn print_report(report: &StatementReport) {
    let rows: usize = report.output.iter().map(RecordBatch::num_rows).sum();
    if rows == 0 {
        return;
    }
    println!(
        "-- line {}: {} ({})",
        report.line,
        report.label,
        seconds(report.took)
    );
    let mut shown = Vec::new();
    let mut left = SHOW_ROWS;
    for batch in &report.output {
        let take = batch.num_rows().min(left);
        shown.push(batch.slice(0, take));
        left -= take;
    }
    match pretty_format_batches(&shown) {
        Ok(table) => println!("{table}"),
        Err(e) => println!("(cannot format the result: {e})"),
    }
    if rows > SHOW_ROWS {
        println!("... {} more rows", rows - SHOW_ROWS);
    }
}

/// Prints the time per statement, changes replayed after a server died, and the rows readers
/// skipped.
pub fn print_summary(reports: &[StatementReport]) {
    let mut table = Table::new();
    table.set_header(["line", "statement", "seconds"]);
    for r in reports {
        table.add_row([
            r.line.to_string(),
            r.label.clone(),
            format!("{:.3}", r.took.as_secs_f64()),
        ]);
    }
    let total: Duration = reports.iter().map(|r| r.took).sum();
    table.add_row([
        "".into(),
        "total".into(),
        format!("{:.3}", total.as_secs_f64()),
    ]);
    println!("{table}");
    for r in reports.iter().filter(|r| r.replayed != (0, 0)) {
        let (replayed, lost) = r.replayed;
        println!(
            "line {}: a parameter server died; {replayed} changes replayed to its restored \
             partitions, {lost} lost",
            r.line
        );
    }
    for r in reports.iter().filter(|r| r.skipped.count > 0) {
        println!(
            "line {}: skipped {} bad input rows; the first:",
            r.line, r.skipped.count
        );
        for row in &r.skipped.first {
            println!("  {row}");
        }
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_file_past_its_cap_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.sql");
        std::fs::write(&small, "SELECT 1;").unwrap();
        assert_eq!(read_job(&small).unwrap(), "SELECT 1;");
        let large = dir.path().join("large.sql");
        let file = std::fs::File::create(&large).unwrap();
        file.set_len(MAX_JOB_BYTES + 1).unwrap();
        let err = read_job(&large).unwrap_err().to_string();
        assert!(
            err.contains("large.sql") && err.contains("67108864"),
            "{err}"
        );
    }
}
