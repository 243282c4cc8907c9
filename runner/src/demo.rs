//! `angel-ps demo`: the main job on the embedded default. Generates Criteo-like click logs
//! (reusing a file generated before with the same rows and seed), runs the CTR job
//! (`examples/ctr/job.sql`, compiled into the binary) on embedded DataFusion against an
//! embedded service, and prints the epoch table, the holdout AUC and where the time went.
//! With `--ballista` the same job runs on a cluster started on this machine as separate
//! processes (PS master + servers, Ballista scheduler + executors), stopped afterwards.

use std::error::Error;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use angel_local_cluster::{LocalCluster, Options};
use angel_sql::job::StatementReport;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Float64Type;

use crate::output::{self, Output};

use crate::run::{MemoryOptions, RunOptions, print_report, print_summary, run_text};

/// The CTR job the demo runs.
pub const CTR_JOB: &str = include_str!("../../examples/ctr/job.sql");

/// Flags of `angel-ps demo`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "flags", derive(clap::Args))]
pub struct DemoOptions {
    /// Rows of generated click logs.
    #[cfg_attr(feature = "flags", arg(long, default_value_t = 1_000_000))]
    pub rows: u64,
    /// Seed of the generator (same seed, same data).
    #[cfg_attr(feature = "flags", arg(long, default_value_t = 7))]
    pub seed: u64,
    /// CSV file to generate the logs into; by default a file in the system temp directory,
    /// reused by later runs with the same rows and seed.
    #[cfg_attr(feature = "flags", arg(long))]
    pub data: Option<PathBuf>,
    /// Training epochs.
    #[cfg_attr(feature = "flags", arg(long, default_value_t = 5))]
    pub epochs: usize,
    /// Servers in the embedded service.
    #[cfg_attr(feature = "flags", arg(long, default_value_t = 2))]
    pub servers: usize,
    /// Run on a local cluster of processes: a PS master and --servers servers, a Ballista
    /// scheduler and --executors executors.
    #[cfg_attr(feature = "flags", arg(long))]
    pub ballista: bool,
    /// Executors of the --ballista cluster.
    #[cfg_attr(feature = "flags", arg(long, default_value_t = 2))]
    pub executors: usize,
    /// Gradient push compression of the model: none, sketchml or
    /// 'sketchml(buckets, groups, rows, col_ratio)'.
    #[cfg_attr(feature = "flags", arg(long, default_value = "none"))]
    pub compression: String,
    /// With compression: compress every push (always), or only while pushes measure faster
    /// compressed (auto).
    #[cfg_attr(feature = "flags", arg(long, default_value = "auto"))]
    pub compression_mode: String,
    /// Serve the status page and Prometheus `/metrics` of the demo's service over HTTP on
    /// this address while it runs (port 0 picks a free port); the URL goes to stderr.
    #[cfg_attr(feature = "flags", arg(long, value_name = "ADDR"))]
    pub http: Option<SocketAddr>,
    /// How the job uses memory.
    #[cfg_attr(feature = "flags", command(flatten))]
    pub memory: MemoryOptions,
}

impl DemoOptions {
    /// The demo's defaults for `rows` rows of click logs, embedded: what benchmarks start
    /// from.
    pub fn of_rows(rows: u64) -> Self {
        DemoOptions {
            rows,
            seed: 7,
            data: None,
            epochs: 5,
            servers: 2,
            ballista: false,
            executors: 2,
            compression: "none".into(),
            compression_mode: "auto".into(),
            http: None,
            memory: Default::default(),
        }
    }
}

/// `angel-ps demo`: the demo job's flags and how to print.
#[derive(Debug)]
#[cfg_attr(feature = "flags", derive(clap::Args))]
pub struct DemoCommand {
    /// The job's flags.
    #[cfg_attr(feature = "flags", command(flatten))]
    pub demo: DemoOptions,
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[cfg_attr(feature = "flags", arg(long, value_enum, default_value_t))]
    pub output: Output,
}

/// Runs the demo and prints its results. Notes on the data and cluster go to standard error,
/// so that standard output holds results only.
pub async fn run(command: DemoCommand) -> Result<(), Box<dyn Error>> {
    let args = &command.demo;
    let (auc, loss) = match command.output {
        Output::Text => {
            let reports = run_ctr(args, None, print_report).await?;
            print_summary(&reports);
            holdout(&reports)?
        }
        Output::Json => {
            let reports = run_ctr(args, None, output::print_report).await?;
            output::print(&output::summary_line(&reports));
            holdout(&reports)?
        }
    };
    match command.output {
        Output::Text => println!("holdout AUC {auc:.4}, log loss {loss:.4}"),
        Output::Json => output::print(&serde_json::json!({
            "kind": "holdout", "auc": auc, "log_loss": loss,
        })),
    }
    Ok(())
}

/// Generates (or reuses) the logs and runs the CTR job, calling `each` after every statement:
/// against the service at `master` if given, else on the `--ballista` local cluster or an
/// embedded service.
pub async fn run_ctr(
    args: &DemoOptions,
    master: Option<String>,
    each: impl FnMut(&StatementReport),
) -> Result<Vec<StatementReport>, Box<dyn Error>> {
    let data = logs(args)?;
    let cluster = match args.ballista {
        true => Some(start_cluster(args)?),
        false => None,
    };
    let run = RunOptions {
        file: PathBuf::from("examples/ctr/job.sql"),
        vars: vec![
            ("data".into(), data.display().to_string()),
            ("epochs".into(), args.epochs.to_string()),
            ("compression".into(), args.compression.clone()),
            ("compression_mode".into(), args.compression_mode.clone()),
        ],
        master: master
            .clone()
            .or_else(|| cluster.as_ref().map(|c| c.master.addr.clone())),
        servers: args.servers,
        partitions: 0,
        ballista: cluster.as_ref().map(|c| c.scheduler_url().to_string()),
        stage: None,
        // The service embedded here serves the page; a cluster's master serves it itself (see
        // `start_cluster`), and a given master has its own flags.
        http: args.http.filter(|_| cluster.is_none() && master.is_none()),
        memory: args.memory.clone(),
        output: Default::default(),
        access: Default::default(),
        namespace: None,
    };
    run_text(&run, CTR_JOB, each).await
}

/// The local cluster of `--ballista`, running this binary.
pub fn start_cluster(args: &DemoOptions) -> Result<LocalCluster, Box<dyn Error>> {
    let binary = std::env::current_exe()?;
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let options = Options {
        master_args: match args.http {
            Some(addr) => vec!["--http".into(), addr.to_string()],
            None => Vec::new(),
        },
        ..Options::default()
    };
    let cluster = LocalCluster::start_with(&binary, args.servers, args.executors, cores, &options)?;
    if args.http.is_some() {
        let url = cluster.master.next_word(Duration::from_secs(5));
        eprintln!("status page and metrics on {}", url.unwrap_or_default());
    }
    eprintln!(
        "local cluster: PS master {} with {} servers, Ballista scheduler {} with {} executors",
        cluster.master.addr,
        cluster.servers.len(),
        cluster.scheduler_url(),
        cluster.executors.len()
    );
    Ok(cluster)
}

/// Where the click logs are: `--data`, or a file in the system temp directory named by the
/// rows and seed.
pub fn logs_path(args: &DemoOptions) -> PathBuf {
    let default =
        std::env::temp_dir().join(format!("angel-ps-ctr-{}-{}.csv", args.rows, args.seed));
    args.data.clone().unwrap_or(default)
}

/// The path of the click logs, generated unless a default-path file already holds them.
pub fn logs(args: &DemoOptions) -> Result<PathBuf, Box<dyn Error>> {
    let path = logs_path(args);
    if args.data.is_none() && path.is_file() {
        eprintln!("using click logs generated before: {}", path.display());
        return Ok(path);
    }
    let started = Instant::now();
    let partial = path.with_extension("csv.partial");
    angel_datagen::ctr_data::generate(&partial, args.rows, args.seed)
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|e| format!("cannot write click logs to {}: {e}", path.display()))?;
    eprintln!(
        "generated {} rows of click logs in {:.1}s: {}",
        args.rows,
        started.elapsed().as_secs_f64(),
        path.display()
    );
    Ok(path)
}

/// (AUC, log loss) from the job's last statement.
pub fn holdout(reports: &[StatementReport]) -> Result<(f64, f64), Box<dyn Error>> {
    let last = reports
        .last()
        .and_then(|r| r.output.first())
        .ok_or("the job returned no result")?;
    let column = |name: &str| {
        last.column_by_name(name)
            .map(|c| c.as_primitive::<Float64Type>().value(0))
            .ok_or_else(|| format!("the job's last result has no column {name}"))
    };
    Ok((column("holdout_auc")?, column("holdout_logloss")?))
}
