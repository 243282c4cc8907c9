//! `angel-ps bench e2e`: the CTR demo job end to end on embedded DataFusion and an embedded
//! service, as a table of phases (read, feature extraction, counter, seal, index, each
//! training epoch, evaluation) with seconds and rows/s, the peak memory of the process, and
//! the speed targets of the speed-and-scale issue beside the measured figures. With `--ballista` the
//! same job then runs on a local cluster of processes (PS master + servers, Ballista
//! scheduler + executors) and a second table sets the two side by side.

use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

use angel_runner::demo::{DemoOptions, holdout, run_ctr};
use angel_runner::output::Output;
use angel_sql::job::StatementReport;
use clap::Args;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{Float64Type, Int64Type};

use super::Table;
use super::link::SlowService;

/// Flags of `angel-ps bench e2e`.
#[derive(Debug, Args)]
pub struct E2eBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// The demo job's flags (rows, seed, epochs, servers, data).
    #[command(flatten)]
    pub demo: DemoOptions,
    /// Also write the tables, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With --compression: the limited link (Mbit/s) the job also runs over, raw and
    /// compressed, beside unlimited loopback.
    #[arg(long, default_value_t = 1000.0)]
    pub link_mbit: f64,
}

/// One timed phase.
struct Phase {
    name: String,
    rows: u64,
    took: Duration,
}

/// The phase a statement of the CTR job is, by what it runs.
pub(super) fn phase_name(sql: &str) -> &'static str {
    [
        ("read_csv", "read CSV"),
        ("make_array", "extract features"),
        ("FROM examples", "extract features"),
        ("ps_counter_add", "counter add"),
        ("ps_counter_seal", "counter seal"),
        ("ps_index", "index"),
        ("ps_auc", "evaluate"),
    ]
    .into_iter()
    .find(|(marker, _)| sql.contains(marker))
    .map_or("other", |(_, name)| name)
}

/// Prints each finished statement, so a long benchmark shows where it is.
fn done(r: &StatementReport) {
    eprintln!("done: {} ({:.2}s)", r.label, r.took.as_secs_f64())
}

/// Runs the benchmark and prints the tables.
pub async fn run(args: E2eBenchArgs) -> Result<(), Box<dyn Error>> {
    let embedded = DemoOptions {
        ballista: false,
        ..args.demo.clone()
    };
    let reports = run_ctr(&embedded, None, done).await?;
    let mut out = embedded_tables(&args, &reports)?;
    if args.demo.ballista {
        let cluster = run_ctr(&args.demo, None, done).await?;
        out = format!("{out}\n{}", side_by_side(&args, &reports, &cluster)?);
    }
    if args.demo.compression != "none" {
        out = format!("{out}\n{}", compression_table(&args).await?);
    }
    if let Some(path) = &args.out {
        super::write(path, &out)?;
    }
    Ok(())
}

/// The job's mean epoch seconds and mean (sent, raw) push MB per epoch.
fn epoch_means(reports: &[StatementReport]) -> Result<(f64, f64, f64), Box<dyn Error>> {
    let table = reports
        .iter()
        .find_map(StatementReport::epoch_table)
        .ok_or("the job trained no model")?;
    let mean = |name: &str| -> Result<f64, Box<dyn Error>> {
        let column = table.column_by_name(name).ok_or("no epoch column")?;
        let values = column.as_primitive::<Float64Type>().values();
        Ok(values.iter().sum::<f64>() / values.len().max(1) as f64)
    };
    Ok((mean("seconds")?, mean("push_mb")?, mean("raw_mb")?))
}

/// The job raw and compressed, on unlimited loopback and over a `--link-mbit` link (a
/// token-bucket proxy in front of every server); printed, and returned as Markdown.
async fn compression_table(args: &E2eBenchArgs) -> Result<String, Box<dyn Error>> {
    let mut rows = Vec::new();
    let mut seconds = Vec::new();
    let asked = args.demo.compression.as_str();
    for link in [None, Some(args.link_mbit)] {
        for (compression, mode) in [("none", "auto"), (asked, "always"), (asked, "auto")] {
            let demo = DemoOptions {
                ballista: false,
                compression: compression.to_string(),
                compression_mode: mode.to_string(),
                ..args.demo.clone()
            };
            let slow = match link {
                Some(mbit) => Some(SlowService::start(demo.servers, mbit).await?),
                None => None,
            };
            let reports = run_ctr(&demo, slow.as_ref().map(SlowService::master_addr), done).await;
            if let Some(slow) = slow {
                slow.shutdown().await?;
            }
            let reports = reports?;
            let (epoch, sent, raw) = epoch_means(&reports)?;
            let (auc, loss) = holdout(&reports)?;
            seconds.push(epoch);
            rows.push(vec![
                link.map_or("loopback".into(), |m| format!("{m:.0} Mbit/s")),
                match compression {
                    "none" => "none".to_string(),
                    _ => format!("{compression}, {mode}"),
                },
                format!("{epoch:.3}"),
                format!("{sent:.1}"),
                format!("{raw:.1}"),
                format!("{auc:.4}"),
                format!("{loss:.4}"),
            ]);
        }
    }
    let table = Table::new(
        &[
            "link",
            "compression",
            "epoch s (mean)",
            "pushed MB/epoch",
            "raw MB/epoch",
            "holdout AUC",
            "log loss",
        ],
        rows,
    );
    let summary = format!(
        "loopback: epochs compressed always {:.2}x, auto {:.2}x the raw ones (target for auto \
         <= 1.05); {:.0} Mbit/s link: epochs compressed always {:.2}x, auto {:.2}x faster than \
         raw (target >= 2x)",
        seconds[1] / seconds[0],
        seconds[2] / seconds[0],
        args.link_mbit,
        seconds[3] / seconds[4],
        seconds[3] / seconds[5]
    );
    super::show(args.output, &[("compression", &table)], &[&summary]);
    Ok(format!("{}\n{summary}\n", table.markdown()))
}

/// Embedded and cluster phases side by side, with the cluster / embedded ratio; printed, and
/// returned as Markdown.
fn side_by_side(
    args: &E2eBenchArgs,
    embedded: &[StatementReport],
    cluster: &[StatementReport],
) -> Result<String, Box<dyn Error>> {
    let (e, c) = (
        phases(embedded, args.demo.rows),
        phases(cluster, args.demo.rows),
    );
    let total = |r: &[StatementReport]| r.iter().map(|r| r.took).sum::<Duration>().as_secs_f64();
    let mut rows: Vec<Vec<String>> = e
        .iter()
        .zip(&c)
        .map(|(e, c)| {
            let (a, b) = (e.took.as_secs_f64(), c.took.as_secs_f64());
            vec![
                e.name.clone(),
                format!("{a:.3}"),
                format!("{b:.3}"),
                format!("{:.2}", b / a),
            ]
        })
        .collect();
    let (a, b) = (total(embedded), total(cluster));
    rows.push(vec![
        "whole job".into(),
        format!("{a:.3}"),
        format!("{b:.3}"),
        format!("{:.2}", b / a),
    ]);
    let table = Table::new(&["phase", "embedded s", "Ballista s", "ratio"], rows);
    let (auc, loss) = holdout(cluster)?;
    let summary = format!(
        "Ballista: {} executors, {} PS servers; holdout AUC {auc:.4}, log loss {loss:.4}; \
         whole job {:.2}x embedded (target <= 1.3x: {})",
        args.demo.executors,
        args.demo.servers,
        b / a,
        if b <= 1.3 * a { "met" } else { "not met" }
    );
    super::show(args.output, &[("ballista", &table)], &[&summary]);
    Ok(format!("{}\n{summary}\n", table.markdown()))
}

/// The embedded run's phase and target tables; printed, and returned as Markdown.
fn embedded_tables(
    args: &E2eBenchArgs,
    reports: &[StatementReport],
) -> Result<String, Box<dyn Error>> {
    let phases = phases(reports, args.demo.rows);
    let total: Duration = reports.iter().map(|r| r.took).sum();
    let rate = |p: &Phase| p.rows as f64 / p.took.as_secs_f64();
    let mut rows: Vec<Vec<String>> = phases
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                format!("{:.3}", p.took.as_secs_f64()),
                p.rows.to_string(),
                format!("{:.2}", rate(p) / 1e6),
            ]
        })
        .collect();
    rows.push(vec![
        "whole job".into(),
        format!("{:.3}", total.as_secs_f64()),
        args.demo.rows.to_string(),
        format!("{:.2}", args.demo.rows as f64 / total.as_secs_f64() / 1e6),
    ]);
    let table = Table::new(&["phase", "seconds", "rows", "M rows/s"], rows);
    let peak = super::memory_mb("VmHWM").map_or("n/a".into(), |mb| format!("{mb:.0} MB"));
    let (auc, loss) = holdout(reports)?;
    let sum = |names: &[&str]| -> Duration {
        phases
            .iter()
            .filter(|p| names.contains(&p.name.as_str()))
            .map(|p| p.took)
            .sum()
    };
    let read = sum(&["read CSV"]).as_secs_f64();
    let csv_mb = std::fs::metadata(angel_runner::demo::logs_path(&args.demo))?.len() as f64 / 1e6;
    let index_rate =
        args.demo.rows as f64 / sum(&["counter add", "counter seal", "index"]).as_secs_f64();
    let epochs: Vec<f64> = phases
        .iter()
        .filter(|p| p.name.starts_with("epoch"))
        .map(|p| p.took.as_secs_f64())
        .collect();
    let epoch = epochs.iter().sum::<f64>() / epochs.len().max(1) as f64;
    let met = |ok: bool| if ok { "yes" } else { "no" }.to_string();
    let targets = Table::new(
        &["target", "measured", "met"],
        vec![
            vec![
                "read CSV >= 400 MB/s".into(),
                format!("{:.0} MB/s", csv_mb / read),
                met(csv_mb / read >= 400.0),
            ],
            vec![
                "counter + index >= 5M rows/s".into(),
                format!("{:.2}M rows/s", index_rate / 1e6),
                met(index_rate >= 5e6),
            ],
            vec![
                "one epoch <= 0.25 s".into(),
                format!("{epoch:.3} s (mean)"),
                met(epoch <= 0.25),
            ],
            vec![
                "whole job <= 3.0 s".into(),
                format!("{:.1} s", total.as_secs_f64()),
                met(total.as_secs_f64() <= 3.0),
            ],
        ],
    );
    let summary = format!("peak RSS {peak}; holdout AUC {auc:.4}, log loss {loss:.4}");
    super::show(
        args.output,
        &[("phases", &table), ("targets", &targets)],
        &[&summary],
    );
    Ok(format!(
        "{}\n{}\n{summary}\n",
        table.markdown(),
        targets.markdown()
    ))
}

/// Phases from the job's statements, with one phase per training epoch.
fn phases(reports: &[StatementReport], rows: u64) -> Vec<Phase> {
    let mut out: Vec<Phase> = Vec::new();
    for r in reports {
        if let Some(table) = r.epoch_table() {
            let trained = table
                .column_by_name("rows")
                .map(|c| c.as_primitive::<Int64Type>().clone());
            let seconds = table
                .column_by_name("seconds")
                .map(|c| c.as_primitive::<Float64Type>().clone());
            let holdout = table
                .column_by_name("holdout_seconds")
                .map(|c| c.as_primitive::<Float64Type>().clone());
            let (Some(trained), Some(seconds), Some(holdout)) = (trained, seconds, holdout) else {
                continue;
            };
            for e in 0..table.num_rows() {
                out.push(Phase {
                    name: format!("epoch {}", e + 1),
                    rows: trained.value(e) as u64,
                    took: Duration::from_secs_f64(seconds.value(e)),
                });
            }
            let evaluated: f64 = holdout.values().iter().sum();
            out.push(Phase {
                name: "holdout after each epoch".into(),
                rows: rows / 10 * table.num_rows() as u64,
                took: Duration::from_secs_f64(evaluated),
            });
            continue;
        }
        let name = phase_name(&r.sql);
        // The job holds out every tenth row; the final evaluation reads only those.
        let phase_rows = if name == "evaluate" { rows / 10 } else { rows };
        match out.last_mut().filter(|p| p.name == name) {
            Some(p) => p.took += r.took,
            None => out.push(Phase {
                name: name.into(),
                rows: phase_rows,
                took: r.took,
            }),
        }
    }
    out
}
