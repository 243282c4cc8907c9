//! The benchmarks of `angel-ps bench`: each prints a table (and writes it as Markdown with
//! `--out`).
//!
//! - [`ps`]: PS pull/push throughput against a raw TCP bound.
//! - [`e2e`]: the demo CTR job end to end, phase by phase, with peak memory.
//! - [`codec`]: SketchML bytes per pair and throughput on mini-batch gradients.
//! - [`recovery`]: snapshot cost, and a server killed under a training loop.
//! - [`sync`]: consistency models and update rules on the CTR job with a slow worker.
//! - [`chaos`]: fault injection on real processes, values lost and doubled per scenario.
//! - [`scale`]: the CTR job at several sizes, time and peak memory per size and phase.
//! - [`mf`]: matrix factorization on synthetic ratings, data-parallel against model rotation.
//! - [`lda`]: the topic model on a generated corpus against the Python `lda` package.
//! - [`gbdt`]: boosted trees on click logs and wide sparse rows against XGBoost and LightGBM.
//! - [`lbfgs`]: full-batch L-BFGS logistic regression against scikit-learn and Spark MLlib.
//! - [`kmeans`]: k-means on generated points against scikit-learn's KMeans and MiniBatchKMeans.
//! - [`link`]: a slow network on one machine (proxies sharing a token bucket), for [`e2e`]
//!   and the compression tests.

pub mod chaos;
pub mod codec;
pub mod e2e;
pub mod gbdt;
pub mod kmeans;
pub mod lbfgs;
pub mod lda;
pub mod link;
pub mod mf;
pub mod ps;
pub mod recovery;
pub mod scale;
pub mod sync;

use std::error::Error;
use std::path::Path;

use clap::Subcommand;

use angel_runner::output::{self, Output};

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Sparse and dense pull/push throughput, with a raw-TCP bound for comparison.
    Ps(ps::PsBenchArgs),
    /// The CTR demo job end to end: time and rows/s per phase, peak memory.
    E2e(e2e::E2eBenchArgs),
    /// SketchML on mini-batch gradients: bytes per pair against raw and zstd, throughput.
    Codec(codec::CodecBenchArgs),
    /// Snapshot write time and pause, a server killed mid-training (detection, restore, first
    /// step after), and the overhead of periodic snapshots.
    Recovery(recovery::RecoveryBenchArgs),
    /// BSP, SSP, ASP, model averaging, ConSGD and DynSGD on the CTR job with one slow worker,
    /// with and without backup workers: time and epochs to a target AUC, final log loss.
    Sync(sync::SyncBenchArgs),
    /// Fault injection on real processes (kills, freezes, restarts, a failing snapshot store)
    /// with exact-value checks: runs, finished, values lost and doubled, recovery time.
    Chaos(chaos::ChaosBenchArgs),
    /// The CTR demo job at several sizes: wall time, rows/s and peak RSS per size and phase.
    Scale(scale::ScaleBenchArgs),
    /// Matrix factorization on synthetic ratings: data-parallel (ASP, SSP) against model
    /// rotation, time to a holdout RMSE, ratings/s, bytes pushed.
    Mf(mf::MfBenchArgs),
    /// The topic model on a corpus drawn from known topics, at several numbers of topics:
    /// log-likelihood after the sweeps and tokens/s, against the Python `lda` package.
    Lda(lda::LdaBenchArgs),
    /// Boosted trees on the demo's click logs and on wide sparse rows: seconds per tree,
    /// holdout AUC and bytes pushed, against XGBoost and LightGBM at the same settings.
    Gbdt(gbdt::GbdtBenchArgs),
    /// Full-batch L-BFGS logistic regression on a9a and the demo's click logs: seconds,
    /// iterations and the objective reached, against scikit-learn and Spark MLlib.
    Lbfgs(lbfgs::LbfgsBenchArgs),
    /// k-means on generated points around hidden centres: seconds, iterations and inertia,
    /// against scikit-learn's KMeans and MiniBatchKMeans.
    Kmeans(kmeans::KmeansBenchArgs),
}

/// Runs a benchmark command.
pub async fn run(command: BenchCommand) -> Result<(), Box<dyn Error>> {
    match command {
        BenchCommand::Ps(args) => Ok(ps::ps(args).await?),
        BenchCommand::E2e(args) => e2e::run(args).await,
        BenchCommand::Scale(args) => scale::run(args).await,
        BenchCommand::Codec(args) => codec::run(args),
        BenchCommand::Recovery(args) => recovery::run(args).await,
        BenchCommand::Sync(args) => sync::run(args).await,
        BenchCommand::Chaos(args) => chaos::run(args).await,
        BenchCommand::Mf(args) => mf::run(args).await,
        BenchCommand::Lda(args) => lda::run(args).await,
        BenchCommand::Gbdt(args) => gbdt::run(args).await,
        BenchCommand::Lbfgs(args) => lbfgs::run(args).await,
        BenchCommand::Kmeans(args) => kmeans::run(args).await,
    }
}

/// A benchmark's result table, printed to the terminal or written as Markdown.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with `header` and `rows` of cells.
    pub fn new(header: &[&str], rows: Vec<Vec<String>>) -> Self {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows,
        }
    }

    /// Box-drawn, for the terminal.
    pub fn terminal(&self) -> String {
        let mut table = comfy_table::Table::new();
        table.set_header(&self.header);
        for row in &self.rows {
            table.add_row(row);
        }
        table.to_string()
    }

    /// GitHub Markdown, for docs.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "| {} |\n|{}\n",
            self.header.join(" | "),
            "---|".repeat(self.header.len())
        );
        for row in &self.rows {
            s.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        s
    }
}

/// Prints a benchmark's `tables`, each under a stable name, then its `notes`: box-drawn tables
/// and plain lines, or with `--output json` one JSON line each (`docs/operations.md`).
pub fn show(how: Output, tables: &[(&str, &Table)], notes: &[&str]) {
    for (name, table) in tables {
        match how {
            Output::Text => println!("{}", table.terminal()),
            Output::Json => output::print(&output::table_line(name, &table.header, &table.rows)),
        }
    }
    for note in notes {
        match how {
            Output::Text => println!("{note}"),
            Output::Json => output::print(&serde_json::json!({"kind": "note", "text": note})),
        }
    }
}

/// Runs `python script args...` (a comparison script under `docs/bench/`) and reads the JSON
/// value on each line of what it prints; an error naming the script and saying what it wrote
/// to stderr when it fails.
pub fn python_lines(
    python: &Path,
    script: &Path,
    args: &[String],
) -> Result<Vec<serde_json::Value>, Box<dyn Error>> {
    let ran = std::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {} {}: {e}", python.display(), script.display()))?;
    if !ran.status.success() {
        let said = String::from_utf8_lossy(&ran.stderr);
        return Err(format!("{} failed: {said}", script.display()).into());
    }
    let lines = String::from_utf8_lossy(&ran.stdout);
    let values = lines.lines().filter(|l| !l.trim().is_empty());
    Ok(values.map(serde_json::from_str).collect::<Result<_, _>>()?)
}

/// `--flag value` pairs as a command's arguments.
pub fn flags(pairs: &[(&str, String)]) -> Vec<String> {
    (pairs.iter())
        .flat_map(|(flag, value)| [flag.to_string(), value.clone()])
        .collect()
}

/// Writes `text` to `path`, naming the file in the error.
pub fn write(path: &Path, text: &str) -> Result<(), Box<dyn Error>> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()).into())
}

/// A memory figure of this process from `/proc/self/status`, in MB: `VmRSS` (resident now)
/// or `VmHWM` (peak resident). `None` where the file does not exist (not Linux).
pub fn memory_mb(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
