//! `angel-ps bench sync`: consistency models and update rules on the CTR job with one slow
//! worker. The click logs go through the demo job's features and counter once; then the same
//! model trains with each variant — BSP, SSP (s = 1, 3), ASP, model averaging, ConSGD,
//! DynSGD — with worker 1 of W made `--slow` times slower, and with backup workers (the
//! mitigation) where workers wait for each other. BSP and ASP also run with no slow worker,
//! for the slowdown. Per run: training seconds and epochs to reach the target holdout AUC,
//! final AUC and log loss, and the seconds workers waited. Embedded, and with `--ballista` on
//! a local cluster of processes (slow runs only; the executors get `ANGEL_SLOW_WORKER`).

use std::error::Error;
use std::path::PathBuf;

use angel_local_cluster::{LocalCluster, Options};
use angel_runner::demo::{CTR_JOB, DemoOptions, logs};
use angel_runner::output::Output;
use angel_runner::run::{RunOptions, run_text};
use angel_sql::job::StatementReport;
use angel_training::sync::worker::{SLOW_WORKER_VAR, set_slow_worker};
use clap::Args;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::Float64Type;

use super::Table;

/// Flags of `angel-ps bench sync`.
#[derive(Debug, Args)]
pub struct SyncBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Rows of generated click logs.
    #[arg(long, default_value_t = 300_000)]
    pub rows: u64,
    /// Training epochs of every run.
    #[arg(long, default_value_t = 6)]
    pub epochs: usize,
    /// Training workers (tasks) of every run.
    #[arg(long, default_value_t = 4)]
    pub workers: u32,
    /// How many times slower worker 1 is.
    #[arg(long, default_value_t = 3.0)]
    pub slow: f64,
    /// Holdout AUC to reach; by default 99.5% of the final AUC of BSP without a slow worker.
    #[arg(long)]
    pub target_auc: Option<f64>,
    /// Also run the slow variants on a local Ballista cluster of processes.
    #[arg(long)]
    pub ballista: bool,
    /// Also write the tables, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The model options every run shares (plain SGD on the servers, so the update rules differ
/// only in how they scale and combine updates).
const MODEL: &str = "kind = 'logistic', counter = 'ctr_features', optimizer = 'sgd', \
                     learning_rate = 2, l2 = 0.0001, batch_size = 512, holdout = 'test'";

/// (name, options, whether workers wait, so backup workers can help).
const VARIANTS: [(&str, &str, bool); 7] = [
    ("BSP", "sync = 'bsp'", true),
    ("SSP s=1", "sync = 'ssp', staleness = 1", true),
    ("SSP s=3", "sync = 'ssp', staleness = 3", true),
    ("ASP", "sync = 'asp'", false),
    (
        "model averaging (BSP)",
        "sync = 'bsp', update = 'average', local_steps = 4",
        true,
    ),
    ("ConSGD (ASP)", "sync = 'asp', update = 'consgd'", false),
    ("DynSGD (ASP)", "sync = 'asp', update = 'dynsgd'", false),
];

/// One training run to make.
struct Run {
    label: String,
    options: String,
}

/// What one run's epoch table says.
struct Outcome {
    label: String,
    /// (cumulative training seconds, holdout AUC, holdout log loss) per epoch.
    epochs: Vec<(f64, f64, f64)>,
    wait_seconds: f64,
    slow_flagged: bool,
}

/// Runs the benchmark and prints its tables.
pub async fn run(args: SyncBenchArgs) -> Result<(), Box<dyn Error>> {
    let demo = DemoOptions {
        epochs: args.epochs,
        ..DemoOptions::of_rows(args.rows)
    };
    let data = logs(&demo)?;
    set_slow_worker(None);
    let even = train(&args, &data, &runs(&args, false), None).await?;
    let target = args
        .target_auc
        .unwrap_or(0.995 * even[0].epochs.last().map_or(0.0, |e| e.1));
    set_slow_worker(Some((1, args.slow)));
    let slow = train(&args, &data, &runs(&args, true), None).await?;
    let mut out = table("embedded", &args, target, even.iter().chain(&slow));
    if args.ballista {
        let env = vec![(SLOW_WORKER_VAR.to_string(), format!("1:{}", args.slow))];
        let options = Options {
            env,
            ..Options::default()
        };
        let binary = std::env::current_exe()?;
        let cluster = LocalCluster::start_with(&binary, 2, 2, args.workers as usize, &options)?;
        let ballista = train(&args, &data, &runs(&args, true), Some(&cluster)).await?;
        out = format!(
            "{out}\n{}",
            table("Ballista", &args, target, ballista.iter())
        );
    }
    if let Some(path) = &args.out {
        super::write(path, &out)?;
    }
    Ok(())
}

/// The runs: with a slow worker every variant, plus backup workers where workers wait; else
/// BSP and ASP only.
fn runs(args: &SyncBenchArgs, slow: bool) -> Vec<Run> {
    let mut runs = Vec::new();
    for (name, options, waits) in VARIANTS {
        if !slow && !matches!(name, "BSP" | "ASP") {
            continue;
        }
        let base = format!(
            "{MODEL}, epochs = {}, workers = {}, {options}",
            args.epochs, args.workers
        );
        let label = match slow {
            true => format!("{name}, 1 slow worker"),
            false => format!("{name}, no slow worker"),
        };
        runs.push(Run {
            label,
            options: base.clone(),
        });
        if slow && waits {
            runs.push(Run {
                label: format!("{name}, 1 slow worker, backup_workers = 1"),
                options: format!("{base}, backup_workers = 1"),
            });
        }
    }
    runs
}

/// Prepares the CTR tables and trains every run, in one job (embedded, or on `cluster`).
async fn train(
    args: &SyncBenchArgs,
    data: &std::path::Path,
    runs: &[Run],
    cluster: Option<&LocalCluster>,
) -> Result<Vec<Outcome>, Box<dyn Error>> {
    let prepare = &CTR_JOB[..CTR_JOB.find("CREATE OR REPLACE MODEL").unwrap_or(0)];
    let mut text = prepare.to_string();
    for run in runs {
        text.push_str(&format!(
            "CREATE OR REPLACE MODEL ctr OPTIONS ({}) AS SELECT label, idx FROM train;\n",
            run.options
        ));
    }
    let job = RunOptions {
        vars: vec![("data".into(), data.display().to_string())],
        master: cluster.map(|c| c.master.addr.clone()),
        ballista: cluster.map(|c| c.scheduler_url().to_string()),
        ..RunOptions::embedded("bench-sync.sql", args.workers as usize)
    };
    let reports = run_text(&job, &text, |r: &StatementReport| {
        eprintln!("done: {} ({:.2}s)", r.label, r.took.as_secs_f64())
    })
    .await?;
    let tables: Vec<&RecordBatch> = reports
        .iter()
        .filter_map(StatementReport::epoch_table)
        .collect();
    Ok(runs
        .iter()
        .zip(tables)
        .map(|(run, t)| outcome(&run.label, t))
        .collect())
}

/// Reads a run's epoch table.
fn outcome(label: &str, table: &RecordBatch) -> Outcome {
    let column = |name: &str| -> Vec<f64> {
        table
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<Float64Type>())
            .map_or_else(Vec::new, |c| {
                c.iter().map(|v| v.unwrap_or(f64::NAN)).collect()
            })
    };
    let mut elapsed = 0.0;
    let epochs = column("seconds")
        .into_iter()
        .zip(column("holdout_auc"))
        .zip(column("holdout_loss"))
        .map(|((s, auc), loss)| {
            elapsed += s;
            (elapsed, auc, loss)
        })
        .collect();
    let slow = table.column_by_name("slow_workers").map(|c| {
        c.as_string::<i32>()
            .iter()
            .any(|s| !s.unwrap_or("").is_empty())
    });
    Outcome {
        label: label.to_string(),
        epochs,
        wait_seconds: column("wait_seconds").iter().sum(),
        slow_flagged: slow.unwrap_or(false),
    }
}

/// The results of `outcomes` as a table, printed and returned as Markdown.
fn table<'a>(
    title: &str,
    args: &SyncBenchArgs,
    target: f64,
    outcomes: impl Iterator<Item = &'a Outcome>,
) -> String {
    let rows = outcomes
        .map(|o| {
            let reached = o.epochs.iter().position(|e| e.1 >= target);
            let (seconds, epoch) = match reached {
                Some(i) => (format!("{:.1}", o.epochs[i].0), (i + 1).to_string()),
                None => ("not reached".to_string(), "-".to_string()),
            };
            let last = o
                .epochs
                .last()
                .copied()
                .unwrap_or((0.0, f64::NAN, f64::NAN));
            vec![
                o.label.clone(),
                seconds,
                epoch,
                format!("{:.4}", last.1),
                format!("{:.4}", last.2),
                format!("{:.1}", last.0),
                format!("{:.1}", o.wait_seconds),
                match o.slow_flagged {
                    true => "yes".to_string(),
                    false => "no".to_string(),
                },
            ]
        })
        .collect();
    let table = Table::new(
        &[
            "run",
            "s to target AUC",
            "epochs to target",
            "final AUC",
            "final log loss",
            "training s",
            "s waited",
            "slow flagged",
        ],
        rows,
    );
    let heading = format!(
        "{title}: {} rows, {} workers, worker 1 {}x slower when slow, target holdout AUC {target:.4}",
        args.rows, args.workers, args.slow
    );
    super::show(args.output, &[], &[&heading]);
    super::show(args.output, &[("outcomes", &table)], &[]);
    format!("### {heading}\n\n{}", table.markdown())
}
