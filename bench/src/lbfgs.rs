//! `angel-ps bench lbfgs`: full-batch L-BFGS logistic regression (`optimizer = 'lbfgs'`) on
//! two data sets, against scikit-learn's `lbfgs` solver and Spark MLlib's LogisticRegression
//! at the same L2 penalty (`--python`, `docs/bench/lbfgs_compare.py`) in the same run.
//!
//! - `a9a`: the LIBSVM split in the repository (32,561 rows, 123 binary features).
//! - `ctr`: the demo's click logs (`--rows`), featurised as `examples/ctr/job.sql` does: a
//!   feature per bucketed count and per category seen 3 times, through the PS counter.
//!
//! Every tool minimises the mean log loss plus `l2/2 |w|^2` (intercept unpenalised); the
//! Python tools' objectives are computed from their weights in double precision. Per run:
//! training seconds, iterations and the objective reached; then, for each other tool, the
//! seconds angel-ps took to reach that tool's objective.

use std::error::Error;
use std::path::{Path, PathBuf};

use angel_runner::demo::{CTR_JOB, DemoOptions, logs};
use angel_runner::output::Output;
use angel_runner::run::{RunOptions, run_text};
use angel_sql::job::StatementReport;
use clap::Args;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, UInt64Type};

use super::Table;

/// Flags of `angel-ps bench lbfgs`.
#[derive(Debug, Args)]
pub struct LbfgsBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// The data sets to run: a9a, ctr (click logs).
    #[arg(long, value_delimiter = ',', default_value = "a9a,ctr")]
    pub sets: Vec<String>,
    /// Rows of the click logs.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// The L2 penalty of every run.
    #[arg(long, default_value_t = 1e-4)]
    pub l2: f64,
    /// angel-ps's most iterations (Spark MLlib's default maxIter too).
    #[arg(long, default_value_t = 100)]
    pub iterations: usize,
    /// Workers of angel-ps, and Spark's local threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// A Python with scikit-learn, scipy and pyspark (and a Java for Spark): runs
    /// `docs/bench/lbfgs_compare.py` on the same rows at the same penalty.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Leave Spark MLlib out of the Python runs.
    #[arg(long)]
    pub no_spark: bool,
    /// Also write the tables, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One run's figures.
struct Outcome {
    set: String,
    tool: String,
    seconds: f64,
    iterations: u64,
    objective: f64,
}

/// angel-ps's objective after each iteration, and the seconds since training began.
struct Trace {
    /// (cumulative seconds, objective), iteration 0 (the starting point) first.
    points: Vec<(f64, f64)>,
}

impl Trace {
    /// The seconds and iterations until the objective first reached `target`.
    fn reaching(&self, target: f64) -> Option<(f64, usize)> {
        (self.points.iter().enumerate())
            .find(|(_, (_, f))| *f <= target)
            .map(|(i, (s, _))| (*s, i))
    }
}

/// Runs the benchmark and prints its tables.
pub async fn run(args: LbfgsBenchArgs) -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let (mut outcomes, mut traces) = (Vec::new(), Vec::new());
    for set in &args.sets {
        let rows = match set.as_str() {
            "a9a" => a9a(),
            "ctr" => ctr(&args, dir.path())?,
            other => return Err(format!("--sets: no data set '{other}' (a9a, ctr)").into()),
        };
        let (outcome, trace, dim) = train(&args, set, &rows).await?;
        outcomes.push(outcome);
        traces.push((set.clone(), trace));
        if let Some(python) = &args.python {
            outcomes.extend(python_runs(&args, python, set, &rows, dim)?);
        }
    }
    let markdown = tables(&args, &outcomes, &traces);
    if let Some(path) = &args.out {
        super::write(path, &markdown)?;
    }
    Ok(())
}

/// A data set: the SQL making table `train` (`label, idx [, val]`), and the file the Python
/// tools read it from.
struct Rows {
    sql: String,
    /// `val` of the training query: `, val` or nothing (every value 1).
    values: &'static str,
    format: &'static str,
    file: PathBuf,
}

/// a9a's training split, from the repository.
fn a9a() -> Rows {
    let file = PathBuf::from("examples/data/a9a/a9a_train.libsvm.gz");
    Rows {
        sql: format!(
            "CREATE TABLE train AS SELECT label, idx, val FROM read_libsvm('{}');\n",
            file.display()
        ),
        values: ", val",
        format: "libsvm",
        file,
    }
}

/// The click logs featurised as the CTR example does; the Python tools read `train` as CSV.
fn ctr(args: &LbfgsBenchArgs, dir: &Path) -> Result<Rows, Box<dyn Error>> {
    let data = logs(&DemoOptions::of_rows(args.rows))?;
    let features = CTR_JOB
        .split("CREATE OR REPLACE MODEL")
        .next()
        .ok_or("the CTR example has no model statement")?;
    let file = dir.join("ctr_train.csv");
    let export = match args.python.is_some() {
        true => format!(
            "COPY (SELECT label, array_to_string(idx, ' ') AS idx FROM train) TO '{}' STORED \
             AS CSV;\n",
            file.display()
        ),
        false => String::new(),
    };
    Ok(Rows {
        sql: features.replace("${data}", &data.display().to_string()) + &export,
        values: "",
        format: "csv",
        file,
    })
}

/// Trains angel-ps's model on set `set`: its outcome, its trace, and the model's dimension.
async fn train(
    args: &LbfgsBenchArgs,
    set: &str,
    rows: &Rows,
) -> Result<(Outcome, Trace, u64), Box<dyn Error>> {
    let dim = match set {
        "a9a" => "dim = 123".to_string(),
        _ => "counter = 'ctr_features'".to_string(),
    };
    let text = format!(
        "{}CREATE OR REPLACE MODEL lbfgs OPTIONS (kind = 'logistic', {dim}, optimizer = \
         'lbfgs', l2 = {}, tolerance = 1e-12, epochs = {}, workers = {}) AS SELECT label, \
         idx{} FROM train;\n",
        rows.sql, args.l2, args.iterations, args.workers, rows.values
    );
    let job = RunOptions::embedded("bench-lbfgs.sql", args.workers);
    let reports = run_text(&job, &text, |r: &StatementReport| {
        eprintln!("done: {} ({:.2}s)", r.label, r.took.as_secs_f64())
    })
    .await?;
    let model = (reports.iter())
        .find(|r| r.sql.contains("CREATE OR REPLACE MODEL lbfgs"))
        .ok_or("the job trained no model")?;
    let table = model.epoch_table().ok_or("no epoch table")?;
    let (seconds, objectives) = (floats(table, "seconds")?, floats(table, "objective")?);
    let mut elapsed = 0.0;
    let points = (seconds.iter().zip(&objectives))
        .map(|(s, f)| {
            elapsed += s;
            (elapsed, *f)
        })
        .collect();
    let dim = match set {
        "a9a" => 123,
        _ => counted(&reports)?,
    };
    let outcome = Outcome {
        set: set.to_string(),
        tool: format!("angel-ps lbfgs, {} workers", args.workers),
        seconds: model.took.as_secs_f64(),
        iterations: (objectives.len() - 1) as u64,
        objective: *objectives.last().ok_or("an empty epoch table")?,
    };
    Ok((outcome, Trace { points }, dim))
}

/// Column `name` of `table` as numbers.
fn floats(table: &RecordBatch, name: &str) -> Result<Vec<f64>, Box<dyn Error>> {
    let column = table
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<Float64Type>())
        .ok_or_else(|| format!("the epoch table has no column {name}"))?;
    Ok(column.values().to_vec())
}

/// The size of the counter the CTR features were sealed into.
fn counted(reports: &[StatementReport]) -> Result<u64, Box<dyn Error>> {
    let sealed = (reports.iter())
        .find(|r| r.sql.contains("ps_counter_seal"))
        .and_then(|r| r.output.first())
        .ok_or("the job sealed no counter")?;
    match sealed.column(0).as_primitive_opt::<UInt64Type>() {
        Some(c) if !c.is_empty() => Ok(c.value(0)),
        _ => Err("the sealed counter's size is not an integer".into()),
    }
}

/// scikit-learn's and Spark MLlib's runs on set `set` at the same penalty.
fn python_runs(
    args: &LbfgsBenchArgs,
    python: &Path,
    set: &str,
    rows: &Rows,
    dim: u64,
) -> Result<Vec<Outcome>, Box<dyn Error>> {
    let script = Path::new("docs/bench/lbfgs_compare.py");
    let mut flags = super::flags(&[
        ("--format", rows.format.to_string()),
        ("--train", rows.file.display().to_string()),
        ("--features", dim.to_string()),
        ("--l2", args.l2.to_string()),
        ("--threads", args.workers.to_string()),
    ]);
    if args.no_spark {
        flags.push("--no-spark".into());
    }
    eprintln!("scikit-learn and Spark MLlib on the {set} set");
    let mut outcomes = Vec::new();
    for said in super::python_lines(python, script, &flags)? {
        outcomes.push(Outcome {
            set: set.to_string(),
            tool: said["tool"].as_str().unwrap_or("?").to_string(),
            seconds: said["seconds"].as_f64().unwrap_or(f64::NAN),
            iterations: said["iterations"].as_u64().unwrap_or(0),
            objective: said["objective"].as_f64().unwrap_or(f64::NAN),
        });
    }
    Ok(outcomes)
}

/// The outcomes, and angel-ps's time to each other tool's objective, printed and returned as
/// Markdown.
fn tables(args: &LbfgsBenchArgs, outcomes: &[Outcome], traces: &[(String, Trace)]) -> String {
    let best = |set: &str| {
        (outcomes.iter().filter(|o| o.set == set))
            .map(|o| o.objective)
            .fold(f64::INFINITY, f64::min)
    };
    let runs = outcomes
        .iter()
        .map(|o| {
            vec![
                o.set.clone(),
                o.tool.clone(),
                format!("{:.2}", o.seconds),
                o.iterations.to_string(),
                format!("{:.8}", o.objective),
                format!("{:.1e}", (o.objective - best(&o.set)) / best(&o.set)),
            ]
        })
        .collect();
    let runs = Table::new(
        &[
            "set",
            "run",
            "training s",
            "iterations",
            "objective",
            "above the best",
        ],
        runs,
    );
    let mut reached = Vec::new();
    for (set, trace) in traces {
        for o in outcomes
            .iter()
            .filter(|o| &o.set == set && !o.tool.starts_with("angel"))
        {
            let (seconds, iterations) = match trace.reaching(o.objective) {
                Some((s, i)) => (format!("{s:.2}"), i.to_string()),
                None => ("not reached".into(), "-".into()),
            };
            let speedup = trace
                .reaching(o.objective)
                .map_or("-".into(), |(s, _)| format!("{:.1}x", o.seconds / s));
            reached.push(vec![
                set.clone(),
                o.tool.clone(),
                format!("{:.2}", o.seconds),
                seconds,
                iterations,
                speedup,
            ]);
        }
    }
    let reached = Table::new(
        &[
            "set",
            "objective of",
            "its s",
            "angel-ps s to it",
            "angel-ps iterations",
            "angel-ps faster by",
        ],
        reached,
    );
    let heading = format!(
        "L2-regularised logistic regression, l2 {} (mean log loss + l2/2 |w|^2), angel-ps at \
         most {} iterations with {} workers; ctr: {} click-log rows",
        args.l2, args.iterations, args.workers, args.rows
    );
    super::show(args.output, &[], &[&heading]);
    super::show(
        args.output,
        &[("lbfgs_runs", &runs), ("lbfgs_time_to_objective", &reached)],
        &[],
    );
    format!(
        "### {heading}\n\n{}\n{}",
        runs.markdown(),
        reached.markdown()
    )
}
