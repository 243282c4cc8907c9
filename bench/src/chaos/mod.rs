//! `angel-ps bench chaos`: fault injection on real processes (a master and servers of this
//! binary on 127.0.0.1) with exact-value checks, each scenario run `--runs` times.
//!
//! Every scenario writes a [`probe::Probe`] (a matrix and a counter with known increments),
//! injects its fault (SIGKILL, SIGSTOP/SIGCONT, a restart without or with an older state, a
//! snapshot store that fails), checks what the service must do about it, and reads the probe
//! back: values below what was acknowledged are lost, values above were applied twice. The
//! table gives, per scenario, the runs, how many finished (met every expectation), the values
//! lost and doubled, and the time from the fault to the first exact read.
//!
//! - [`lab`]: processes, waits and checks.
//! - [`probe`]: the data written and read back.
//! - [`master`], [`kills`], [`freeze`], [`writers`], [`rotation`], [`executors`]: the
//!   scenarios.

pub mod executors;
pub mod freeze;
pub mod kills;
pub mod lab;
pub mod master;
pub mod probe;
pub mod rotation;
pub mod writers;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Duration;

use angel_runner::output::Output;
use clap::{Args, ValueEnum};

use super::Table;
use super::ps::progress;
use lab::Lab;
use probe::Tally;

/// Flags of `angel-ps bench chaos`.
#[derive(Debug, Args)]
pub struct ChaosBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Runs of each scenario.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Scenarios to run, comma separated (all by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenario: Vec<Scenario>,
    /// A Python with the `angel_ps` package, for `python-writer-left` (`pip install ./python`).
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// Also write the table, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// A fault and what the service must do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// The master restarted without its state, then with it, then told to start empty.
    MasterWithoutState,
    /// The master resumed from a copy of its state older than what its servers saw.
    MasterOlderState,
    /// The snapshot store fails (a full disk), then the master restarts on its stale state.
    FailingStore,
    /// A server killed and restarted on its own address.
    ServerRestarted,
    /// Two of three servers killed at once: one recovery's target is dead too.
    TwoServersKilled,
    /// Every server killed; a newcomer takes the partitions.
    EveryServerKilled,
    /// A server killed under a stream of pushes and counter increases.
    KilledMidStream,
    /// A server killed after the writer made its changes durable and left.
    WriterLeft,
    /// A server killed after a Python writer (the `angel_ps` package, on `--python`) left its
    /// `with` block and exited.
    PythonWriterLeft,
    /// A writer's replay buffer full: it asks for snapshots; then a server is killed.
    FullReplayBuffer,
    /// A server frozen past the timeout, woken, then a new owner killed.
    FrozenServer,
    /// The master frozen past three server timeouts, then woken: no server is declared dead.
    FrozenMaster,
    /// The master killed in the middle of a rotation round and started again on its state:
    /// every step of every round trained once.
    MasterKilledMidRotation,
    /// The master frozen 3 s in the middle of a rotation round, then woken: every step of
    /// every round trained once.
    MasterFrozenMidRotation,
    /// A Ballista executor killed in the middle of a pass that trains and counts: every value
    /// counted once and every mini-batch applied once, against a run without the failure.
    ExecutorKilled,
    /// A Ballista executor frozen (SIGSTOP) in the middle of that pass: only its silence tells
    /// it is gone.
    ExecutorFrozen,
}

impl Scenario {
    /// The scenario's name on the command line and in the table.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// Runs the scenario once, starting processes of `binary` (and Python writers on
    /// `python3`).
    pub async fn run(self, binary: &Path) -> lab::Result<Outcome> {
        self.run_with(binary, Path::new("python3")).await
    }

    /// [`Scenario::run`], Python writers running on `python`.
    pub async fn run_with(self, binary: &Path, python: &Path) -> lab::Result<Outcome> {
        let lab = Lab::new(binary, python)?;
        match self {
            Scenario::MasterWithoutState => master::without_state(&lab).await,
            Scenario::MasterOlderState => master::older_state(&lab).await,
            Scenario::FailingStore => master::failing_store(&lab).await,
            Scenario::ServerRestarted => kills::restarted_on_address(&lab).await,
            Scenario::TwoServersKilled => kills::two_at_once(&lab).await,
            Scenario::EveryServerKilled => kills::every_server(&lab).await,
            Scenario::KilledMidStream => kills::mid_stream(&lab).await,
            Scenario::WriterLeft => writers::writer_left(&lab).await,
            Scenario::PythonWriterLeft => writers::python_writer_left(&lab).await,
            Scenario::FullReplayBuffer => writers::full_replay_buffer(&lab).await,
            Scenario::FrozenServer => freeze::frozen(&lab).await,
            Scenario::FrozenMaster => freeze::frozen_master(&lab).await,
            Scenario::MasterKilledMidRotation => rotation::master_killed(&lab).await,
            Scenario::MasterFrozenMidRotation => rotation::master_frozen(&lab).await,
            Scenario::ExecutorKilled => executors::executor_killed(&lab).await,
            Scenario::ExecutorFrozen => executors::executor_frozen(&lab).await,
        }
    }
}

/// What one run of a scenario found.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Values lost and doubled, matrix and counter together.
    pub tally: Tally,
    /// From the fault to the first exact read (or acknowledged change, under a stream; or the
    /// job's end, for a job on a cluster).
    pub recovery: Duration,
}

/// Runs `bench chaos` and prints (and optionally writes) the table.
pub async fn run(args: ChaosBenchArgs) -> Result<(), Box<dyn Error>> {
    let binary = std::env::current_exe()?;
    let scenarios = match args.scenario.is_empty() {
        true => Scenario::value_variants().to_vec(),
        false => args.scenario.clone(),
    };
    let bar = progress(
        scenarios.len() as u64 * u64::from(args.runs),
        "chaos scenarios",
    );
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut total = Tally::default();
    for scenario in scenarios {
        let mut outcomes = Vec::new();
        for run in 1..=args.runs {
            bar.set_message(format!("{} (run {run})", scenario.name()));
            match scenario.run_with(&binary, &args.python).await {
                Ok(outcome) => outcomes.push(outcome),
                Err(e) => failures.push(format!("{} run {run}: {e}", scenario.name())),
            }
            bar.inc(1);
        }
        total = outcomes.iter().fold(total, |t, o| t + o.tally);
        rows.push(row(scenario, args.runs, &outcomes));
    }
    bar.finish_and_clear();
    let table = Table::new(
        &[
            "scenario",
            "runs",
            "finished",
            "lost",
            "doubled",
            "recovery ms (median)",
            "recovery ms (max)",
        ],
        rows,
    );
    let notes: Vec<&str> = failures.iter().map(String::as_str).collect();
    super::show(args.output, &[("chaos", &table)], &notes);
    if let Some(path) = &args.out {
        super::write(path, &table.markdown())?;
    }
    match (failures.len(), total.lost + total.doubled) {
        (0, 0) => Ok(()),
        (unfinished, off) => Err(format!(
            "{unfinished} runs did not finish (see the notes above), {off} values off"
        )
        .into()),
    }
}

/// A scenario's row: its finished runs' values lost and doubled (summed) and recovery times.
fn row(scenario: Scenario, runs: u32, outcomes: &[Outcome]) -> Vec<String> {
    let tally = outcomes.iter().fold(Tally::default(), |t, o| t + o.tally);
    let mut ms: Vec<f64> = outcomes
        .iter()
        .map(|o| o.recovery.as_secs_f64() * 1e3)
        .collect();
    ms.sort_by(f64::total_cmp);
    let shown = |v: Option<&f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    vec![
        scenario.name(),
        runs.to_string(),
        outcomes.len().to_string(),
        tally.lost.to_string(),
        tally.doubled.to_string(),
        shown(ms.get(ms.len() / 2)),
        shown(ms.last()),
    ]
}
