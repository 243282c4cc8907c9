//! `angel-ps bench scale`: the CTR demo job at several sizes (generating the data), as wall
//! time, rows/s and peak RSS per size and per phase, to show how cost grows with rows.
//!
//! Each phase's peak is the process's resident high-water mark from the end of the previous
//! statement to the end of the phase's last one (Linux resets it through `clear_refs`), so
//! one process measures every size and phase.

use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

use angel_runner::demo::{DemoOptions, holdout, logs, run_ctr};
use angel_runner::output::Output;
use angel_runner::run::MemoryOptions;
use angel_sql::job::StatementReport;
use clap::Args;

use super::Table;
use super::e2e::phase_name;

/// Flags of `angel-ps bench scale`.
#[derive(Debug, Args)]
pub struct ScaleBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Sizes to run, in rows, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000000,3000000,10000000"
    )]
    pub rows: Vec<u64>,
    /// Training epochs per run.
    #[arg(long, default_value_t = 5)]
    pub epochs: usize,
    /// Servers in the embedded service.
    #[arg(long, default_value_t = 2)]
    pub servers: usize,
    /// Also write the tables, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// How each run uses memory.
    #[command(flatten)]
    pub memory: MemoryOptions,
}

/// One phase of one run: seconds, and the peak RSS while it ran.
struct Phase {
    name: &'static str,
    took: Duration,
    peak_mb: f64,
}

/// One size's run.
struct Run {
    rows: u64,
    phases: Vec<Phase>,
    auc: f64,
}

/// Runs the benchmark and prints the tables.
pub async fn run(args: ScaleBenchArgs) -> Result<(), Box<dyn Error>> {
    let mut runs = Vec::new();
    for &rows in &args.rows {
        let demo = DemoOptions {
            epochs: args.epochs,
            servers: args.servers,
            executors: 0,
            memory: args.memory.clone(),
            ..DemoOptions::of_rows(rows)
        };
        logs(&demo)?;
        runs.push(run_one(&demo).await?);
    }
    let (sizes, phases) = (size_table(&runs), phase_table(&runs));
    super::show(args.output, &[("sizes", &sizes), ("phases", &phases)], &[]);
    if let Some(path) = &args.out {
        super::write(
            path,
            &format!("{}\n{}", sizes.markdown(), phases.markdown()),
        )?;
    }
    Ok(())
}

/// Runs the job on `demo`'s (already generated) data, measuring each statement.
async fn run_one(demo: &DemoOptions) -> Result<Run, Box<dyn Error>> {
    let mut phases: Vec<Phase> = Vec::new();
    reset_peak();
    let reports: Vec<StatementReport> = run_ctr(demo, None, |r| {
        let peak_mb = super::memory_mb("VmHWM").unwrap_or(0.0);
        reset_peak();
        let name = match r.epoch_table() {
            Some(_) => "train (every epoch, holdout after each)",
            None => phase_name(&r.sql),
        };
        match phases.last_mut().filter(|p| p.name == name) {
            Some(p) => {
                p.took += r.took;
                p.peak_mb = p.peak_mb.max(peak_mb);
            }
            None => phases.push(Phase {
                name,
                took: r.took,
                peak_mb,
            }),
        }
    })
    .await?;
    let (auc, _) = holdout(&reports)?;
    Ok(Run {
        rows: demo.rows,
        phases,
        auc,
    })
}

/// Resets the process's peak RSS (`VmHWM`) to its current RSS; a no-op off Linux.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn size_table(runs: &[Run]) -> Table {
    let rows = runs
        .iter()
        .map(|r| {
            let took: Duration = r.phases.iter().map(|p| p.took).sum();
            let peak = r.phases.iter().map(|p| p.peak_mb).fold(0.0, f64::max);
            vec![
                r.rows.to_string(),
                format!("{:.2}", took.as_secs_f64()),
                format!("{:.3}", r.rows as f64 / took.as_secs_f64() / 1e6),
                format!("{peak:.0}"),
                format!("{:.4}", r.auc),
            ]
        })
        .collect();
    Table::new(
        &[
            "rows",
            "whole job s",
            "M rows/s",
            "peak RSS MB",
            "holdout AUC",
        ],
        rows,
    )
}

fn phase_table(runs: &[Run]) -> Table {
    let names: Vec<&str> = runs
        .first()
        .map_or(Vec::new(), |r| r.phases.iter().map(|p| p.name).collect());
    let rows = names
        .iter()
        .map(|&name| {
            let mut row = vec![name.to_string()];
            for run in runs {
                let p = run.phases.iter().find(|p| p.name == name);
                row.push(p.map_or("-".into(), |p| format!("{:.2}", p.took.as_secs_f64())));
                row.push(p.map_or("-".into(), |p| format!("{:.0}", p.peak_mb)));
            }
            row
        })
        .collect();
    let header: Vec<String> = std::iter::once("phase".to_string())
        .chain(runs.iter().flat_map(|r| {
            let m = r.rows as f64 / 1e6;
            [format!("{m}M rows: s"), format!("{m}M rows: peak MB")]
        }))
        .collect();
    Table::new(&header.iter().map(String::as_str).collect::<Vec<_>>(), rows)
}
