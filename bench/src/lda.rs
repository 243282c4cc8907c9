//! `angel-ps bench lda`: the topic model on a corpus drawn from LDA's generative process with
//! known topics (`angel_datagen::corpus_data`), at several numbers of topics, with the same
//! priors and sweeps as, with `--python`, the Python `lda` package (collapsed Gibbs sampling
//! in C, `docs/bench/lda_package.py`) in the same run, and in each parallel mode asked for
//! (`--parallelism data,rotation`), and scikit-learn's online variational LDA
//! (`docs/bench/lda_sklearn.py`) for held-out perplexity. Per run: the joint log-likelihood
//! after the start and after the sweeps, seconds of sampling, tokens per second and per core,
//! the perplexity of the held-out documents (every run scored the same way: `ps_perplexity`'s
//! estimate); and the log-likelihood against time along the sweeps.

use std::error::Error;
use std::path::{Path, PathBuf};

use angel_datagen::corpus_data::{self, CorpusSpec};
use angel_runner::output::Output;
use angel_runner::run::{RunOptions, run_text};
use angel_sql::job::StatementReport;
use clap::Args;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, Int64Type};

use super::Table;

/// Flags of `angel-ps bench lda`.
#[derive(Debug, Args)]
pub struct LdaBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Documents of the generated corpus.
    #[arg(long, default_value_t = 100_000)]
    pub docs: u64,
    /// Words of its vocabulary.
    #[arg(long, default_value_t = 20_000)]
    pub words: u64,
    /// Mean tokens per document.
    #[arg(long, default_value_t = 100)]
    pub doc_length: u64,
    /// Topics of the hidden model the corpus is drawn from.
    #[arg(long, default_value_t = 100)]
    pub hidden_topics: usize,
    /// Numbers of topics to train with, one run each.
    #[arg(long, value_delimiter = ',', default_value = "20,100,1000")]
    pub topics: Vec<usize>,
    /// Sweeps (epochs) of every run.
    #[arg(long, default_value_t = 20)]
    pub epochs: usize,
    /// Workers (tasks) of angel-ps's runs.
    #[arg(long, default_value_t = 2)]
    pub workers: u32,
    /// The parallel modes to run angel-ps in, one run each: data, rotation.
    #[arg(long, value_delimiter = ',', default_value = "data")]
    pub parallelism: Vec<String>,
    /// The documents' prior (and the generator's).
    #[arg(long, default_value_t = 0.1)]
    pub alpha: f64,
    /// The topics' prior (and the generator's).
    #[arg(long, default_value_t = 0.01)]
    pub beta: f64,
    /// A Python with the `lda` package, scikit-learn and scipy: runs
    /// `docs/bench/lda_package.py` (same topics, priors and sweeps) and
    /// `docs/bench/lda_sklearn.py` on the same corpus.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Passes of scikit-learn's online LDA over the training documents.
    #[arg(long, default_value_t = 1)]
    pub sklearn_passes: usize,
    /// Also write the table, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One run's figures.
struct Outcome {
    topics: usize,
    label: String,
    tokens: u64,
    initial: f64,
    last: f64,
    seconds: f64,
    /// Passes over the tokens in `seconds`.
    sweeps: usize,
    cores: usize,
    /// The held-out documents' perplexity under the trained model.
    holdout: f64,
    /// After each sweep: the seconds of sampling so far and the log-likelihood.
    curve: Vec<(f64, f64)>,
}

/// Generates the corpus (once per size and seed), trains at each number of topics and prints
/// the table.
pub async fn run(args: LdaBenchArgs) -> Result<(), Box<dyn Error>> {
    let corpus = corpus(&args)?;
    let mut outcomes = train(&args, &corpus).await?;
    if let Some(python) = &args.python {
        let on = (&args, python.as_path(), &corpus);
        for &k in &args.topics {
            eprintln!("the lda package, {k} topics");
            let package = ("lda_package.py", "lda package (C)".to_string());
            outcomes.push(python_run(on, k, package, ("--sweeps", args.epochs))?);
            eprintln!("scikit-learn, {k} topics");
            let passes = args.sklearn_passes;
            let label = format!("scikit-learn online VB, {passes} passes");
            outcomes.push(python_run(
                on,
                k,
                ("lda_sklearn.py", label),
                ("--passes", passes),
            )?);
        }
    }
    let markdown = table(&args, &outcomes);
    if let Some(path) = &args.out {
        super::write(path, &markdown)?;
    }
    Ok(())
}

/// Trains a model at each number of topics, in each parallel mode, in one job.
async fn train(args: &LdaBenchArgs, corpus: &Corpus) -> Result<Vec<Outcome>, Box<dyn Error>> {
    let read = |table: &str, path: &Path| {
        format!(
            "CREATE TABLE {table} AS SELECT label AS doc, idx AS words, val AS counts FROM \
             read_libsvm('{}', 'index_base=0');\n",
            path.display()
        )
    };
    let mut text = read("corpus", &corpus.train) + &read("held", &corpus.holdout);
    let runs: Vec<(usize, &str)> = (args.topics.iter())
        .flat_map(|&k| args.parallelism.iter().map(move |p| (k, p.as_str())))
        .collect();
    for (k, parallelism) in &runs {
        text.push_str(&format!(
            "CREATE OR REPLACE MODEL topics OPTIONS (kind = 'lda', topics = {k}, dim = {}, \
             alpha = {}, beta = {}, epochs = {}, workers = {}, parallelism = '{parallelism}') \
             AS SELECT doc, words, counts FROM corpus;\n\
             SELECT ps_perplexity('topics', words, counts) FROM held;\n",
            args.words, args.alpha, args.beta, args.epochs, args.workers
        ));
    }
    let job = RunOptions::embedded("bench-lda.sql", args.workers as usize);
    let reports = run_text(&job, &text, |r: &StatementReport| {
        eprintln!("done: {} ({:.2}s)", r.label, r.took.as_secs_f64())
    })
    .await?;
    let tables = reports.iter().filter_map(StatementReport::epoch_table);
    let perplexities = (reports.iter())
        .filter(|r| r.sql.contains("ps_perplexity"))
        .map(|r| {
            (r.output.first())
                .and_then(|b| b.column(0).as_primitive_opt::<Float64Type>())
                .map_or(f64::NAN, |c| c.value(0))
        });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok((runs.iter().zip(tables).zip(perplexities))
        .map(|((&(k, parallelism), t), holdout)| {
            let label = format!("angel-ps, {} workers, {parallelism}", args.workers);
            Outcome {
                holdout,
                ..outcome(k, (label, args.workers as usize, cores), t)
            }
        })
        .collect())
}

/// Reads a run's epoch table: the rounds after the random start are the sweeps.
fn outcome(
    topics: usize,
    (label, workers, cores): (String, usize, usize),
    table: &RecordBatch,
) -> Outcome {
    let floats = |name: &str| -> Vec<f64> {
        (table.column_by_name(name))
            .and_then(|c| c.as_primitive_opt::<Float64Type>())
            .map_or_else(Vec::new, |c| c.values().to_vec())
    };
    let tokens = (table.column_by_name("tokens"))
        .and_then(|c| c.as_primitive_opt::<Int64Type>())
        .and_then(|c| c.values().first().copied())
        .unwrap_or_default();
    let (ll, seconds) = (floats("log_likelihood"), floats("seconds"));
    let elapsed = seconds.iter().skip(1).scan(0.0, |t, s| {
        *t += s;
        Some(*t)
    });
    Outcome {
        topics,
        label,
        tokens: tokens as u64,
        initial: ll.first().copied().unwrap_or(f64::NAN),
        last: ll.last().copied().unwrap_or(f64::NAN),
        seconds: seconds.iter().skip(1).sum(),
        sweeps: ll.len().saturating_sub(1),
        cores: workers.min(cores),
        holdout: f64::NAN,
        curve: elapsed.zip(ll.iter().skip(1).copied()).collect(),
    }
}

/// A Python script's run at `topics` topics (`docs/bench/{script}`, labelled `label`) on the
/// corpus with the same priors, `sweeps` passes given as `flag`; what it does not print (a
/// variational model has no sampled topics to take a joint log-likelihood of) stays NaN.
fn python_run(
    (args, python, corpus): (&LdaBenchArgs, &Path, &Corpus),
    topics: usize,
    (script, label): (&str, String),
    (flag, sweeps): (&str, usize),
) -> Result<Outcome, Box<dyn Error>> {
    let script = Path::new("docs/bench").join(script);
    let flags = [
        ("--input", corpus.train.display().to_string()),
        ("--holdout", corpus.holdout.display().to_string()),
        ("--words", args.words.to_string()),
        ("--topics", topics.to_string()),
        (flag, sweeps.to_string()),
        ("--alpha", args.alpha.to_string()),
        ("--beta", args.beta.to_string()),
    ];
    let said = (super::python_lines(python, &script, &super::flags(&flags))?.pop())
        .ok_or_else(|| format!("{} printed nothing", script.display()))?;
    let number = |key: &str| said[key].as_f64().unwrap_or(f64::NAN);
    Ok(Outcome {
        topics,
        label,
        tokens: number("tokens") as u64,
        initial: number("initial_log_likelihood"),
        last: number("log_likelihood"),
        seconds: number("seconds"),
        sweeps,
        cores: 1,
        holdout: number("holdout_perplexity"),
        curve: Vec::new(),
    })
}

/// The generated corpus's training and held-out files.
struct Corpus {
    train: PathBuf,
    holdout: PathBuf,
}

/// The generated corpus, made unless one of that size and seed exists.
fn corpus(args: &LdaBenchArgs) -> Result<Corpus, Box<dyn Error>> {
    let name = format!(
        "angel-ps-corpus-{}x{}-{}-k{}-a{}-b{}",
        args.docs, args.words, args.doc_length, args.hidden_topics, args.alpha, args.beta
    );
    let dir = std::env::temp_dir();
    let (train, test) = (
        dir.join(format!("{name}.txt")),
        dir.join(format!("{name}-holdout.txt")),
    );
    let made = Corpus {
        train: train.clone(),
        holdout: test.clone(),
    };
    if train.is_file() && test.is_file() {
        return Ok(made);
    }
    let spec = CorpusSpec {
        docs: args.docs,
        words: args.words,
        topics: args.hidden_topics,
        doc_length: args.doc_length,
        alpha: args.alpha,
        beta: args.beta,
        holdout: 0.1,
    };
    let partial = |p: &Path| p.with_extension("partial");
    corpus_data::generate(&partial(&train), &partial(&test), &spec, 13)
        .and_then(|_| std::fs::rename(partial(&train), &train))
        .and_then(|()| std::fs::rename(partial(&test), &test))
        .map_err(|e| format!("cannot write a corpus to {}: {e}", dir.display()))?;
    Ok(made)
}

/// The outcomes as a table, printed and returned as Markdown.
fn table(args: &LdaBenchArgs, outcomes: &[Outcome]) -> String {
    let reference = |k: usize| {
        (outcomes.iter())
            .find(|o| o.topics == k && o.label.starts_with("lda"))
            .map(|o| o.last)
    };
    let rows = outcomes
        .iter()
        .map(|o| {
            let rate = o.tokens as f64 * o.sweeps as f64 / o.seconds.max(1e-9);
            let versus = match reference(o.topics) {
                Some(r) if !o.label.starts_with("lda") => {
                    figure((o.last - r) / r.abs() * 100.0, |x| format!("{x:+.2}%"))
                }
                _ => "-".to_string(),
            };
            vec![
                o.topics.to_string(),
                o.label.clone(),
                figure(o.initial, |x| format!("{x:.4e}")),
                figure(o.last, |x| format!("{x:.4e}")),
                figure(o.last / o.tokens.max(1) as f64, |x| format!("{x:.4}")),
                versus,
                format!("{:.1}", o.seconds),
                format!("{:.2}", rate / 1e6),
                format!("{:.2}", rate / o.cores as f64 / 1e6),
                figure(o.holdout, |x| format!("{x:.1}")),
            ]
        })
        .collect();
    let table = Table::new(
        &[
            "topics",
            "run",
            "log-likelihood at the start",
            "after the sweeps",
            "per token",
            "vs lda package",
            "sampling s",
            "M tokens/s",
            "M tokens/s/core",
            "held-out perplexity",
        ],
        rows,
    );
    let heading = format!(
        "{} documents of about {} tokens over {} words, drawn from {} topics (alpha {}, beta \
         {}); {} sweeps with the same priors",
        args.docs,
        args.doc_length,
        args.words,
        args.hidden_topics,
        args.alpha,
        args.beta,
        args.epochs
    );
    let curves = curves(args, outcomes);
    super::show(args.output, &[], &[&heading]);
    super::show(args.output, &[("lda", &table), ("lda_curve", &curves)], &[]);
    format!(
        "### {heading}\n\n{}\nLog-likelihood against seconds of sampling, after sweeps:\n\n{}",
        table.markdown(),
        curves.markdown()
    )
}

/// `x` as `show` formats it, or "-" when there is none (NaN).
fn figure(x: f64, show: impl Fn(f64) -> String) -> String {
    if x.is_nan() { "-".to_string() } else { show(x) }
}

/// The log-likelihood against time of angel-ps's runs: after the first and second sweeps, a
/// quarter and half of them, and all.
fn curves(args: &LdaBenchArgs, outcomes: &[Outcome]) -> Table {
    let mut sweeps = vec![1, 2, args.epochs / 4, args.epochs / 2, args.epochs];
    sweeps.retain(|&s| s >= 1);
    sweeps.sort_unstable();
    sweeps.dedup();
    let rows = (outcomes.iter().filter(|o| !o.curve.is_empty()))
        .map(|o| {
            let points = sweeps.iter().map(|&s| match o.curve.get(s - 1) {
                Some((t, ll)) => format!("{ll:.4e} ({t:.1} s)"),
                None => "-".to_string(),
            });
            [o.topics.to_string(), o.label.clone()]
                .into_iter()
                .chain(points)
                .collect()
        })
        .collect();
    let names: Vec<String> = sweeps.iter().map(|s| format!("sweep {s}")).collect();
    let header: Vec<&str> = ["topics", "run"]
        .into_iter()
        .chain(names.iter().map(String::as_str))
        .collect();
    Table::new(&header, rows)
}
