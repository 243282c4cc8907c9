//! `angel-ps bench mf`: matrix factorization on synthetic ratings from a known low-rank model
//! (`angel_datagen::ratings_data`), trained by Angel's data-parallel mode (ASP and SSP), by Harp's
//! model rotation and (with 4 workers or more) Angel's hybrid of the two, with the same rank,
//! rate, regularisation and epochs; `--slow` adds a straggler, without and with time control.
//! Per run: the seconds and epochs to a holdout RMSE target, the final train and holdout RMSE
//! against the noise floor, ratings trained per second, and the bytes pushed per epoch.

use std::error::Error;
use std::path::{Path, PathBuf};

use angel_datagen::ratings_data::{self, RatingsSpec};
use angel_runner::output::Output;
use angel_runner::run::{RunOptions, run_text};
use angel_sql::job::StatementReport;
use angel_training::sync::worker::set_slow_worker;
use clap::Args;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, Int64Type};

use super::Table;

/// Flags of `angel-ps bench mf`.
#[derive(Debug, Args)]
pub struct MfBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Users of the generated ratings.
    #[arg(long, default_value_t = 20_000)]
    pub users: u64,
    /// Items of the generated ratings.
    #[arg(long, default_value_t = 5_000)]
    pub items: u64,
    /// Ratings generated (10% of them held out).
    #[arg(long, default_value_t = 1_000_000)]
    pub ratings: u64,
    /// Rank of the trained models (and of the hidden one, unless `--hidden-rank`).
    #[arg(long, default_value_t = 16)]
    pub rank: usize,
    /// Rank of the hidden model the ratings come from: below the trained rank when the
    /// ratings are too few to pin down a hidden model of that rank (about rank x (users +
    /// items) x log(users + items) ratings are needed).
    #[arg(long)]
    pub hidden_rank: Option<usize>,
    /// Standard deviation of the ratings' noise: the floor of any model's RMSE.
    #[arg(long, default_value_t = 0.1)]
    pub noise: f64,
    /// Training epochs of every run.
    #[arg(long, default_value_t = 10)]
    pub epochs: usize,
    /// Training workers (tasks) of every run.
    #[arg(long, default_value_t = 2)]
    pub workers: u32,
    /// SGD's step size, every run's.
    #[arg(long, default_value_t = 0.03)]
    pub learning_rate: f64,
    /// Holdout RMSE to reach; by default 1.1 times the best final holdout RMSE.
    #[arg(long)]
    pub target_rmse: Option<f64>,
    /// Also time model rotation with worker 1 this many times slower (the straggler hook),
    /// without and with time control (`step_ms = 'auto'`).
    #[arg(long)]
    pub slow: Option<f64>,
    /// Leave out the data-parallel runs (at the scale an epoch of them takes minutes).
    #[arg(long)]
    pub skip_data_parallel: bool,
    /// Also write the table, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The options every run shares: plain SGD, as the SGD recommenders run it.
const MODEL: &str = "kind = 'mf', optimizer = 'sgd', l2 = 0.02, holdout = 'test'";

/// (name, options).
const VARIANTS: [(&str, &str); 3] = [
    (
        "data-parallel, ASP",
        "parallelism = 'data', sync = 'asp', batch_size = 256",
    ),
    (
        "data-parallel, SSP s=3",
        "parallelism = 'data', sync = 'ssp', staleness = 3, batch_size = 256",
    ),
    ("model rotation", "parallelism = 'rotation'"),
];

/// What one run's epoch table says, per epoch.
struct Outcome {
    label: String,
    /// (cumulative training seconds, train RMSE, holdout RMSE, push MB).
    epochs: Vec<(f64, f64, f64, f64)>,
    /// Rows trained over all epochs.
    rows: i64,
}

/// Generates the ratings (once per size and seed), trains every variant and prints the table.
pub async fn run(args: MfBenchArgs) -> Result<(), Box<dyn Error>> {
    let files = ratings(&args)?;
    let mut variants: Vec<(String, &str)> = (VARIANTS.iter())
        .filter(|(_, options)| !(args.skip_data_parallel && options.contains("'data'")))
        .map(|&(label, options)| (label.to_string(), options))
        .collect();
    // Angel's hybrid: two groups rotating within, sharing through the PS.
    if args.workers >= 4 && args.workers.is_multiple_of(2) {
        let label = format!("hybrid, 2 groups of {} workers", args.workers / 2);
        variants.push((label, "parallelism = 'rotation', groups = 2"));
    }
    let mut outcomes = train(&args, &files, &variants).await?;
    if let Some(factor) = args.slow {
        let slow = format!("model rotation, worker 1 {factor}x slower");
        let variants = [
            (slow.clone(), "parallelism = 'rotation'"),
            (
                format!("{slow}, step_ms = 'auto'"),
                "parallelism = 'rotation', step_ms = 'auto'",
            ),
        ];
        set_slow_worker(Some((1, factor)));
        let slowed = train(&args, &files, &variants).await;
        set_slow_worker(None);
        outcomes.extend(slowed?);
    }
    let markdown = table(&args, &outcomes);
    if let Some(path) = &args.out {
        super::write(path, &markdown)?;
    }
    Ok(())
}

/// Trains each of `variants` (label, options) on the ratings `files` in one job.
async fn train(
    args: &MfBenchArgs,
    (train, test): &(PathBuf, PathBuf),
    variants: &[(String, &str)],
) -> Result<Vec<Outcome>, Box<dyn Error>> {
    let mut text = format!(
        "CREATE TABLE train AS SELECT * FROM read_csv('{}');\n\
         CREATE TABLE test AS SELECT * FROM read_csv('{}');\n",
        train.display(),
        test.display()
    );
    for (_, options) in variants {
        text.push_str(&format!(
            "CREATE OR REPLACE MODEL recs OPTIONS ({MODEL}, {options}, rank = {}, users = {}, \
             items = {}, epochs = {}, workers = {}, learning_rate = {}) AS SELECT user, item, \
             rating FROM train;\n",
            args.rank, args.users, args.items, args.epochs, args.workers, args.learning_rate
        ));
    }
    let job = RunOptions::embedded("bench-mf.sql", args.workers as usize);
    let reports = run_text(&job, &text, |r: &StatementReport| {
        eprintln!("done: {} ({:.2}s)", r.label, r.took.as_secs_f64())
    })
    .await?;
    let tables = reports.iter().filter_map(StatementReport::epoch_table);
    Ok((variants.iter().zip(tables))
        .map(|((label, _), t)| outcome(label, t))
        .collect())
}

/// The generated train and holdout files, made unless files of that size and seed exist.
fn ratings(args: &MfBenchArgs) -> Result<(PathBuf, PathBuf), Box<dyn Error>> {
    let hidden_rank = args.hidden_rank.unwrap_or(args.rank);
    let name = format!(
        "angel-ps-ratings-{}x{}-{}-r{}-n{}",
        args.users, args.items, args.ratings, hidden_rank, args.noise
    );
    let dir = std::env::temp_dir();
    let (train, test) = (
        dir.join(format!("{name}-train.csv")),
        dir.join(format!("{name}-test.csv")),
    );
    if train.is_file() && test.is_file() {
        return Ok((train, test));
    }
    let spec = RatingsSpec {
        users: args.users,
        items: args.items,
        ratings: args.ratings,
        rank: hidden_rank,
        noise: args.noise,
        holdout: 0.1,
    };
    let partial = |p: &Path| p.with_extension("csv.partial");
    ratings_data::generate(&partial(&train), &partial(&test), &spec, 11)
        .and_then(|()| std::fs::rename(partial(&train), &train))
        .and_then(|()| std::fs::rename(partial(&test), &test))
        .map_err(|e| format!("cannot write ratings to {}: {e}", dir.display()))?;
    Ok((train, test))
}

/// Reads a run's epoch table.
fn outcome(label: &str, table: &RecordBatch) -> Outcome {
    let column = |name: &str| -> Vec<f64> {
        (table.column_by_name(name))
            .and_then(|c| c.as_primitive_opt::<Float64Type>())
            .map_or_else(Vec::new, |c| {
                c.iter().map(|v| v.unwrap_or(f64::NAN)).collect()
            })
    };
    let rows = (table.column_by_name("rows"))
        .and_then(|c| c.as_primitive_opt::<Int64Type>())
        .map_or(0, |c| c.values().iter().sum());
    let mut elapsed = 0.0;
    let seconds = column("seconds");
    let (train, holdout, mb) = (
        column("train_rmse"),
        column("holdout_rmse"),
        column("push_mb"),
    );
    let epochs = (0..seconds.len())
        .map(|e| {
            elapsed += seconds[e];
            (elapsed, train[e], holdout[e], mb[e])
        })
        .collect();
    Outcome {
        label: label.to_string(),
        epochs,
        rows,
    }
}

/// The outcomes as a table, printed and returned as Markdown.
fn table(args: &MfBenchArgs, outcomes: &[Outcome]) -> String {
    let best = (outcomes.iter())
        .filter_map(|o| o.epochs.last().map(|e| e.2))
        .fold(f64::INFINITY, f64::min);
    let target = args.target_rmse.unwrap_or(1.1 * best);
    let rows = outcomes
        .iter()
        .map(|o| {
            let reached = o.epochs.iter().position(|e| e.2 <= target);
            let (seconds, epoch) = match reached {
                Some(i) => (format!("{:.1}", o.epochs[i].0), (i + 1).to_string()),
                None => ("not reached".to_string(), "-".to_string()),
            };
            let last = o
                .epochs
                .last()
                .copied()
                .unwrap_or((0.0, f64::NAN, f64::NAN, 0.0));
            let rate = o.rows as f64 / last.0.max(1e-9) / 1e6;
            let mb = o.epochs.iter().map(|e| e.3).sum::<f64>() / o.epochs.len().max(1) as f64;
            // Time control starts from the first epoch's steps.
            let later = match o.epochs.first() {
                Some(first) if o.epochs.len() > 1 => {
                    format!("{:.2}", (last.0 - first.0) / (o.epochs.len() - 1) as f64)
                }
                _ => "-".to_string(),
            };
            vec![
                o.label.clone(),
                seconds,
                epoch,
                format!("{:.4}", last.1),
                format!("{:.4}", last.2),
                format!("{:.1}", last.0),
                later,
                format!("{rate:.2}"),
                format!("{mb:.2}"),
            ]
        })
        .collect();
    let table = Table::new(
        &[
            "run",
            "s to target RMSE",
            "epochs to target",
            "final train RMSE",
            "final holdout RMSE",
            "training s",
            "s/epoch after the 1st",
            "M ratings/s",
            "push MB/epoch",
        ],
        rows,
    );
    let heading = format!(
        "{} users x {} items, {} ratings (10% held out), hidden rank {}, rank {}, noise sigma \
         {} (the RMSE floor), {} epochs, {} workers, learning rate {}, target holdout RMSE \
         {target:.4}",
        args.users,
        args.items,
        args.ratings,
        args.hidden_rank.unwrap_or(args.rank),
        args.rank,
        args.noise,
        args.epochs,
        args.workers,
        args.learning_rate
    );
    super::show(args.output, &[], &[&heading]);
    super::show(args.output, &[("mf", &table)], &[]);
    format!("### {heading}\n\n{}", table.markdown())
}
