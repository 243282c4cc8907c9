//! `angel-ps bench kmeans`: k-means (`kind = 'kmeans'`, Lloyd's and mini-batch) on generated
//! points around hidden centres (`angel_datagen::blobs_data`), against scikit-learn's KMeans and
//! MiniBatchKMeans at the same k (`--python`, `docs/bench/kmeans_compare.py`) in the same run,
//! every run from the same first centres (scikit-learn's k-means++ draw, given to angel-ps as
//! `init = 'table:seeds'`), so they reach the same local optimum; without `--python`, from
//! angel-ps's own k-means++. Per run: training seconds, iterations and the inertia of its
//! centres; then, for each scikit-learn run, the seconds angel-ps's Lloyd run took to reach
//! that run's inertia.

use std::error::Error;
use std::path::{Path, PathBuf};

use angel_datagen::blobs_data::{self, BlobsSpec};
use angel_runner::output::Output;
use angel_runner::run::{RunOptions, run_text};
use angel_sql::job::StatementReport;
use clap::Args;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Float64Type;

use super::Table;

/// Flags of `angel-ps bench kmeans`.
#[derive(Debug, Args)]
pub struct KmeansBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Points generated.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Coordinates per point.
    #[arg(long, default_value_t = 50)]
    pub dim: usize,
    /// Hidden centres, and the k of every run.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Standard deviation of the points around their centre, per coordinate.
    #[arg(long, default_value_t = 4.0)]
    pub spread: f64,
    /// Most iterations of every run.
    #[arg(long, default_value_t = 100)]
    pub iterations: usize,
    /// Workers of angel-ps, and scikit-learn's threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// A Python with scikit-learn and numpy: runs `docs/bench/kmeans_compare.py` on the same
    /// points.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Also write the tables, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One run's figures.
struct Outcome {
    tool: String,
    seconds: f64,
    iterations: u64,
    inertia: f64,
}

/// Runs the benchmark and prints its tables.
pub async fn run(args: KmeansBenchArgs) -> Result<(), Box<dyn Error>> {
    let (csv, raw) = points(&args)?;
    let dir = tempfile::tempdir()?;
    let seeds = dir.path().join("seeds.csv");
    if let Some(python) = &args.python {
        python_runs(&args, python, &raw, ("--seeds-out", &seeds))?;
    }
    let seeds = args.python.is_some().then_some(seeds.as_path());
    let (mut outcomes, trace) = train(&args, &csv, seeds).await?;
    if let (Some(python), Some(seeds)) = (&args.python, seeds) {
        outcomes.extend(python_runs(&args, python, &raw, ("--seeds", seeds))?);
    }
    let markdown = tables(&args, &outcomes, &trace);
    if let Some(path) = &args.out {
        super::write(path, &markdown)?;
    }
    Ok(())
}

/// The points, generated once per size (in the system temp directory): the CSV file and the
/// raw one.
fn points(args: &KmeansBenchArgs) -> Result<(PathBuf, PathBuf), Box<dyn Error>> {
    let spec = BlobsSpec {
        rows: args.rows,
        dim: args.dim,
        clusters: args.k,
        spread: args.spread,
    };
    let name = format!(
        "angel-ps-blobs-{}x{}-{}-{}",
        spec.rows, spec.dim, spec.clusters, spec.spread
    );
    let dir = std::env::temp_dir();
    let (csv, raw) = (
        dir.join(format!("{name}.csv")),
        dir.join(format!("{name}.f64")),
    );
    if !(csv.is_file() && raw.is_file()) {
        eprintln!("generating {} points", spec.rows);
        let partial = |p: &Path| p.with_extension("partial");
        let (csv_part, raw_part) = (partial(&csv), dir.join(format!("{name}.f64.partial")));
        blobs_data::generate(&csv_part, &raw_part, &spec, 3)
            .and_then(|()| std::fs::rename(&csv_part, &csv))
            .and_then(|()| std::fs::rename(&raw_part, &raw))
            .map_err(|e| format!("cannot write points to {}: {e}", dir.display()))?;
    }
    Ok((csv, raw))
}

/// Clusters the points with angel-ps, by Lloyd's algorithm and by mini-batch k-means (1024
/// rows a step, as scikit-learn's): their outcomes (the inertia of the final centres over
/// every point, by `ps_distance`) and Lloyd's (cumulative seconds, inertia) per iteration.
async fn train(
    args: &KmeansBenchArgs,
    csv: &Path,
    seeds: Option<&Path>,
) -> Result<(Vec<Outcome>, Vec<(f64, f64)>), Box<dyn Error>> {
    let columns: Vec<String> = (0..args.dim).map(|d| format!("x{d} double")).collect();
    let coordinates: Vec<String> = (0..args.dim).map(|d| format!("x{d}")).collect();
    let table = |name: &str, file: &Path| {
        format!(
            "CREATE TABLE {name} AS SELECT id, make_array({}) AS point FROM read_csv('{}', \
             'header=true; columns=id bigint, {}');\n",
            coordinates.join(", "),
            file.display(),
            columns.join(", ")
        )
    };
    let (seeds_table, init) = match seeds {
        Some(file) => (table("seeds", file), "table:seeds"),
        None => (String::new(), "k-means++"),
    };
    let mut text = format!("{}{seeds_table}", table("points", csv));
    let most = args.iterations;
    let runs = [
        ("lloyd", "lloyd", most),
        ("minibatch", "minibatch", most),
        ("one_pass", "minibatch", 1),
    ];
    for (name, algorithm, epochs) in runs {
        text += &format!(
            "CREATE OR REPLACE MODEL {name} OPTIONS (kind = 'kmeans', k = {}, dim = {}, \
             init = '{init}', algorithm = '{algorithm}', batch_size = 1024, epochs = {epochs}, \
             workers = {}) AS SELECT id, point FROM points;\n\
             SELECT sum(power(ps_distance('{name}', point), 2)) AS inertia FROM points;\n",
            args.k, args.dim, args.workers
        );
    }
    let job = RunOptions::embedded("bench-kmeans.sql", args.workers);
    let reports = run_text(&job, &text, |r: &StatementReport| {
        eprintln!("done: {} ({:.2}s)", r.label, r.took.as_secs_f64())
    })
    .await?;
    let mut outcomes = Vec::new();
    let mut trace = Vec::new();
    for (name, algorithm, epochs) in runs {
        let at = (reports.iter())
            .position(|r| r.sql.contains(&format!("MODEL {name} ")))
            .ok_or("the job trained no model")?;
        let (model, scored) = (&reports[at], reports.get(at + 1).ok_or("no inertia")?);
        let table = model.epoch_table().ok_or("no epoch table")?;
        let column = |name: &str| -> Result<Vec<f64>, Box<dyn Error>> {
            let c = (table.column_by_name(name))
                .and_then(|c| c.as_primitive_opt::<Float64Type>())
                .ok_or_else(|| format!("the epoch table has no column {name}"))?;
            Ok(c.values().to_vec())
        };
        let (seconds, inertia) = (column("seconds")?, column("inertia")?);
        let took = model.took.as_secs_f64();
        let last = (scored.output.first())
            .and_then(|b| b.column(0).as_primitive_opt::<Float64Type>())
            .map(|c| c.value(0))
            .ok_or("the inertia query answered nothing")?;
        if name == "lloyd" {
            // Iteration i's inertia is that of the centres the iterations before it left,
            // whose time includes the set-up (first centres, the variance's sample).
            let mut elapsed = took - seconds.iter().sum::<f64>();
            trace = (seconds.iter().zip(&inertia))
                .map(|(s, i)| {
                    let reached = (elapsed, *i);
                    elapsed += s;
                    reached
                })
                .collect();
            trace.push((took, last));
        }
        let passes = match epochs {
            1 => ", one pass",
            _ => "",
        };
        outcomes.push(Outcome {
            tool: format!("angel-ps {algorithm}{passes}, {} workers", args.workers),
            seconds: took,
            iterations: inertia.len() as u64,
            inertia: last,
        });
    }
    Ok((outcomes, trace))
}

/// scikit-learn's runs on the same points, with `seeds` (`--seeds-out FILE`: only draw the
/// first centres into FILE; `--seeds FILE`: start every run from them).
fn python_runs(
    args: &KmeansBenchArgs,
    python: &Path,
    raw: &Path,
    seeds: (&str, &Path),
) -> Result<Vec<Outcome>, Box<dyn Error>> {
    let script = Path::new("docs/bench/kmeans_compare.py");
    eprintln!("scikit-learn ({} {})", seeds.0, seeds.1.display());
    let flags = [
        ("--raw", raw.display().to_string()),
        (seeds.0, seeds.1.display().to_string()),
        ("--dim", args.dim.to_string()),
        ("--k", args.k.to_string()),
        ("--threads", args.workers.to_string()),
        ("--max-iter", args.iterations.to_string()),
    ];
    let mut outcomes = Vec::new();
    for said in super::python_lines(python, script, &super::flags(&flags))? {
        outcomes.push(Outcome {
            tool: said["tool"].as_str().unwrap_or("?").to_string(),
            seconds: said["seconds"].as_f64().unwrap_or(f64::NAN),
            iterations: said["iterations"].as_u64().unwrap_or(0),
            inertia: said["inertia"].as_f64().unwrap_or(f64::NAN),
        });
    }
    Ok(outcomes)
}

/// The outcomes, and angel-ps's time to each other run's inertia, printed and returned as
/// Markdown.
fn tables(args: &KmeansBenchArgs, outcomes: &[Outcome], trace: &[(f64, f64)]) -> String {
    let best = (outcomes.iter().map(|o| o.inertia)).fold(f64::INFINITY, f64::min);
    let runs = outcomes
        .iter()
        .map(|o| {
            vec![
                o.tool.clone(),
                format!("{:.2}", o.seconds),
                o.iterations.to_string(),
                format!("{:.6e}", o.inertia),
                format!("{:.1e}", (o.inertia - best) / best),
            ]
        })
        .collect();
    let runs = Table::new(
        &[
            "run",
            "training s",
            "iterations",
            "inertia",
            "above the best",
        ],
        runs,
    );
    // Entry i of the trace: the centres after i moves.
    let reaching = |target: f64| {
        (trace.iter().enumerate())
            .find(|(_, (_, inertia))| *inertia <= target * (1.0 + 1e-9))
            .map(|(i, (s, _))| (*s, i))
    };
    let reached = (outcomes.iter())
        .filter(|o| !o.tool.starts_with("angel-ps"))
        .map(|o| {
            let (seconds, iterations, faster) = match reaching(o.inertia) {
                Some((s, i)) => (
                    format!("{s:.2}"),
                    i.to_string(),
                    format!("{:.1}x", o.seconds / s),
                ),
                None => ("not reached".into(), "-".into(), "-".into()),
            };
            vec![
                o.tool.clone(),
                format!("{:.2}", o.seconds),
                seconds,
                iterations,
                faster,
            ]
        })
        .collect();
    let reached = Table::new(
        &[
            "inertia of",
            "its s",
            "angel-ps lloyd s to it",
            "angel-ps lloyd iterations",
            "angel-ps lloyd faster by",
        ],
        reached,
    );
    let heading = format!(
        "k-means, k = {}, on {} generated points of {} coordinates around {} centres (spread \
         {}), at most {} iterations, {} workers",
        args.k, args.rows, args.dim, args.k, args.spread, args.iterations, args.workers
    );
    super::show(args.output, &[], &[&heading]);
    super::show(
        args.output,
        &[("kmeans_runs", &runs), ("kmeans_time_to_inertia", &reached)],
        &[],
    );
    format!(
        "### {heading}\n\n{}\n{}",
        runs.markdown(),
        reached.markdown()
    )
}
