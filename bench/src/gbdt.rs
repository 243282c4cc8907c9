//! `angel-ps bench gbdt`: boosted trees on two data sets, against XGBoost (`hist`) and
//! LightGBM at the same settings (`--python`, `docs/bench/gbdt_compare.py`) in the same run.
//!
//! - `dense`: the demo's click logs (`angel_datagen::ctr_data`), 39 features a row: the 13 counts
//!   as they are and the 26 categories as their codes through the PS counter (`ps_index` of
//!   the column's value), a missing one as -1 in every tool; every tenth row held out.
//! - `sparse`: generated wide rows (`angel_datagen::sparse_data`), `--sparse-nnz` of
//!   `--sparse-features` features each.
//!
//! Per run: training seconds, seconds per tree, holdout AUC and log loss after the trees, and
//! for angel-ps the MB its workers and job pushed per tree.

use std::error::Error;
use std::path::{Path, PathBuf};

use angel_datagen::ctr_data::{CATEGORICAL, NUMERIC};
use angel_datagen::sparse_data::{self, SparseSpec};
use angel_runner::demo::{DemoOptions, logs};
use angel_runner::output::Output;
use angel_runner::run::{RunOptions, run_text};
use angel_sql::job::StatementReport;
use clap::Args;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Float64Type;

use super::Table;

/// Flags of `angel-ps bench gbdt`.
#[derive(Debug, Args)]
pub struct GbdtBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// The data sets to run: dense (click logs), sparse (generated wide rows).
    #[arg(long, value_delimiter = ',', default_value = "dense,sparse")]
    pub sets: Vec<String>,
    /// Rows of the click logs.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Rows of the sparse set.
    #[arg(long, default_value_t = 1_000_000)]
    pub sparse_rows: u64,
    /// Features of the sparse set.
    #[arg(long, default_value_t = 100_000)]
    pub sparse_features: u64,
    /// Features each row of the sparse set lists.
    #[arg(long, default_value_t = 50)]
    pub sparse_nnz: usize,
    /// Trees of every run.
    #[arg(long, default_value_t = 100)]
    pub trees: usize,
    /// Depth of every tree.
    #[arg(long, default_value_t = 6)]
    pub depth: usize,
    /// Learning rate (shrinkage) of every run.
    #[arg(long, default_value_t = 0.1)]
    pub learning_rate: f64,
    /// Histogram bins per feature.
    #[arg(long, default_value_t = 32)]
    pub bins: usize,
    /// Workers of angel-ps, and threads of XGBoost and LightGBM.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// A Python with xgboost, lightgbm, scikit-learn and numpy: runs
    /// `docs/bench/gbdt_compare.py` on the same rows at the same settings.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Also write the table, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One run's figures.
struct Outcome {
    set: String,
    tool: String,
    seconds: f64,
    auc: f64,
    logloss: f64,
    push_mb_per_tree: Option<f64>,
}

/// Runs the benchmark and prints its table.
pub async fn run(args: GbdtBenchArgs) -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let mut outcomes = Vec::new();
    for set in &args.sets {
        let files = match set.as_str() {
            "dense" => dense(&args, dir.path()).await?,
            "sparse" => sparse(&args)?,
            other => return Err(format!("--sets: no data set '{other}' (dense, sparse)").into()),
        };
        outcomes.push(train(&args, set, &files).await?);
        if let Some(python) = &args.python {
            outcomes.extend(python_runs(&args, python, set, &files)?);
        }
    }
    let markdown = table(&args, &outcomes);
    if let Some(path) = &args.out {
        super::write(path, &markdown)?;
    }
    Ok(())
}

/// A data set as angel-ps reads it (SQL making `train` and `test` of `label, idx, val`) and as
/// the Python tools read it (`--format` and files).
struct Files {
    sql: String,
    dim: u64,
    format: &'static str,
    train: PathBuf,
    test: PathBuf,
}

/// The click logs as 39 features a row; writes them for the Python tools into `dir`.
async fn dense(args: &GbdtBenchArgs, dir: &Path) -> Result<Files, Box<dyn Error>> {
    let data = logs(&DemoOptions::of_rows(args.rows))?;
    let numbers: Vec<String> = (1..=NUMERIC).map(|i| format!("i{i}")).collect();
    let categories: Vec<String> = (1..=CATEGORICAL).map(|c| format!("c{c}")).collect();
    let columns: Vec<String> = (numbers.iter().map(|n| format!("{n} int")))
        .chain(categories.iter().map(|c| format!("{c} string")))
        .collect();
    let features: Vec<String> = (numbers.iter())
        .map(|n| format!("coalesce(CAST({n} AS DOUBLE), -1)"))
        .chain(categories.iter().map(|c| {
            format!(
                "coalesce(CAST(ps_index('gbdt_codes', ps_feature('{c}', {c}))[1] AS DOUBLE), -1)"
            )
        }))
        .enumerate()
        .map(|(i, f)| format!("{f} AS f{i}"))
        .collect();
    let named: Vec<String> = (0..features.len()).map(|i| format!("f{i}")).collect();
    let (named, indices) = (
        named.join(", "),
        (0..features.len())
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    );
    let (train, test) = (dir.join("dense_train.csv"), dir.join("dense_test.csv"));
    let copy = |file: &Path, holdout: bool| {
        format!(
            "COPY (SELECT label, {named} FROM coded WHERE holdout = {holdout}) TO '{}' STORED AS \
             CSV;\n",
            file.display()
        )
    };
    let sql = format!(
        "CREATE TABLE logs AS SELECT * FROM read_csv('{}', 'header=true; bad_rows=skip; \
         columns=id int, label double, {}');\n\
         SELECT ps_counter_add('gbdt_codes', make_array({})) AS counted FROM logs WHERE id % 10 \
         <> 0;\n\
         SELECT ps_counter_seal('gbdt_codes', 1) AS codes;\n\
         CREATE TABLE coded AS SELECT label, id % 10 = 0 AS holdout, {} FROM logs;\n\
         CREATE TABLE train AS SELECT label, make_array({indices}) AS idx, make_array({named}) \
         AS val FROM coded WHERE NOT holdout;\n\
         CREATE TABLE test AS SELECT label, make_array({indices}) AS idx, make_array({named}) \
         AS val FROM coded WHERE holdout;\n{}{}",
        data.display(),
        columns.join(", "),
        (categories.iter().map(|c| format!("ps_feature('{c}', {c})")))
            .collect::<Vec<_>>()
            .join(", "),
        features.join(", "),
        match args.python.is_some() {
            true => copy(&train, false),
            false => String::new(),
        },
        match args.python.is_some() {
            true => copy(&test, true),
            false => String::new(),
        },
    );
    Ok(Files {
        sql,
        dim: (NUMERIC + CATEGORICAL) as u64,
        format: "csv",
        train,
        test,
    })
}

/// The sparse set, generated once per size (in the system temp directory).
fn sparse(args: &GbdtBenchArgs) -> Result<Files, Box<dyn Error>> {
    let spec = SparseSpec {
        rows: args.sparse_rows,
        features: args.sparse_features,
        nnz: args.sparse_nnz,
        holdout: 0.1,
    };
    let name = format!(
        "angel-ps-sparse-{}x{}-{}",
        spec.rows, spec.features, spec.nnz
    );
    let dir = std::env::temp_dir();
    let (train, test) = (
        dir.join(format!("{name}.txt")),
        dir.join(format!("{name}-holdout.txt")),
    );
    if !(train.is_file() && test.is_file()) {
        eprintln!("generating {} sparse rows", spec.rows);
        let partial = |p: &Path| p.with_extension("partial");
        sparse_data::generate(&partial(&train), &partial(&test), &spec, 11)
            .and_then(|_| std::fs::rename(partial(&train), &train))
            .and_then(|()| std::fs::rename(partial(&test), &test))
            .map_err(|e| format!("cannot write sparse rows to {}: {e}", dir.display()))?;
    }
    let read = |table: &str, path: &Path| {
        format!(
            "CREATE TABLE {table} AS SELECT label, idx, val FROM read_libsvm('{}', \
             'index_base=0');\n",
            path.display()
        )
    };
    Ok(Files {
        sql: read("train", &train) + &read("test", &test),
        dim: spec.features,
        format: "libsvm",
        train,
        test,
    })
}

/// Trains angel-ps's model on set `set` and scores the holdout.
async fn train(args: &GbdtBenchArgs, set: &str, files: &Files) -> Result<Outcome, Box<dyn Error>> {
    let text = format!(
        "{}CREATE OR REPLACE MODEL gb OPTIONS (kind = 'gbdt', dim = {}, trees = {}, depth = {}, \
         learning_rate = {}, bins = {}, l2 = 1, min_child_weight = 1, workers = {}) AS SELECT \
         label, idx, val FROM train;\n\
         SELECT ps_auc(label, p) AS auc, ps_logloss(label, p) AS logloss FROM (SELECT label, \
         ps_predict('gb', idx, val) AS p FROM test) AS scored;\n",
        files.sql, files.dim, args.trees, args.depth, args.learning_rate, args.bins, args.workers
    );
    let job = RunOptions::embedded("bench-gbdt.sql", args.workers);
    let reports = run_text(&job, &text, |r: &StatementReport| {
        eprintln!("done: {} ({:.2}s)", r.label, r.took.as_secs_f64())
    })
    .await?;
    let model = (reports.iter())
        .find(|r| r.sql.contains("CREATE OR REPLACE MODEL"))
        .ok_or("the job trained no model")?;
    let epochs = model.epoch_table().ok_or("no epoch table")?;
    let push_mb = (epochs.column_by_name("push_mb"))
        .and_then(|c| c.as_primitive_opt::<Float64Type>())
        .map_or(0.0, |c| c.values().iter().sum::<f64>());
    let scored = (reports.last().and_then(|r| r.output.first())).ok_or("no holdout score")?;
    let value = |name: &str| {
        (scored.column_by_name(name))
            .and_then(|c| c.as_primitive_opt::<Float64Type>())
            .map_or(f64::NAN, |c| c.value(0))
    };
    Ok(Outcome {
        set: set.to_string(),
        tool: format!("angel-ps, {} workers", args.workers),
        seconds: model.took.as_secs_f64(),
        auc: value("auc"),
        logloss: value("logloss"),
        push_mb_per_tree: Some(push_mb / args.trees as f64),
    })
}

/// XGBoost's and LightGBM's runs on set `set` at the same settings.
fn python_runs(
    args: &GbdtBenchArgs,
    python: &Path,
    set: &str,
    files: &Files,
) -> Result<Vec<Outcome>, Box<dyn Error>> {
    let script = Path::new("docs/bench/gbdt_compare.py");
    let flags = [
        ("--format", files.format.to_string()),
        ("--train", files.train.display().to_string()),
        ("--test", files.test.display().to_string()),
        ("--features", files.dim.to_string()),
        ("--trees", args.trees.to_string()),
        ("--depth", args.depth.to_string()),
        ("--learning-rate", args.learning_rate.to_string()),
        ("--bins", args.bins.to_string()),
        ("--threads", args.workers.to_string()),
    ];
    eprintln!("XGBoost and LightGBM on the {set} set");
    let mut outcomes = Vec::new();
    for said in super::python_lines(python, script, &super::flags(&flags))? {
        let number = |key: &str| said[key].as_f64().unwrap_or(f64::NAN);
        outcomes.push(Outcome {
            set: set.to_string(),
            tool: said["tool"].as_str().unwrap_or("?").to_string(),
            seconds: number("seconds"),
            auc: number("auc"),
            logloss: number("logloss"),
            push_mb_per_tree: None,
        });
    }
    Ok(outcomes)
}

/// The outcomes as a table, printed and returned as Markdown.
fn table(args: &GbdtBenchArgs, outcomes: &[Outcome]) -> String {
    let rows = outcomes
        .iter()
        .map(|o| {
            vec![
                o.set.clone(),
                o.tool.clone(),
                format!("{:.1}", o.seconds),
                format!("{:.3}", o.seconds / args.trees as f64),
                format!("{:.4}", o.auc),
                format!("{:.4}", o.logloss),
                o.push_mb_per_tree
                    .map_or("-".into(), |mb| format!("{mb:.2}")),
            ]
        })
        .collect();
    let table = Table::new(
        &[
            "set",
            "run",
            "training s",
            "s per tree",
            "holdout AUC",
            "holdout log loss",
            "push MB per tree",
        ],
        rows,
    );
    let heading = format!(
        "{} trees of depth {}, learning rate {}, {} bins, l2 1, min_child_weight 1; dense: {} \
         click-log rows (39 features); sparse: {} rows of {} of {} features",
        args.trees,
        args.depth,
        args.learning_rate,
        args.bins,
        args.rows,
        args.sparse_rows,
        args.sparse_nnz,
        args.sparse_features
    );
    super::show(args.output, &[], &[&heading]);
    super::show(args.output, &[("gbdt", &table)], &[]);
    format!("### {heading}\n\n{}", table.markdown())
}
