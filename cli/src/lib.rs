//! The `angel-ps` command line: one binary for every role, on top of every other crate.
//!
//! # Layout
//!
//! - `master`, `server`, `standalone`: run the service ([`service`]).
//! - `status`: the service as tables (`angel_runner::status`).
//! - `snapshot`: have every server snapshot its changed partitions now ([`snapshot`]).
//! - `drop`: remove a namespace's matrices and counters ([`drop`]).
//! - `run`: a SQL job file on embedded DataFusion or a Ballista cluster (`angel_runner::run`).
//! - `scheduler`, `executor`: a Ballista cluster that runs our functions ([`scheduler`],
//!   [`executor`]); the scheduler's [`stall_watchdog`] cancels jobs it stopped scheduling,
//!   its [`executor_probe`] removes an executor whose process is gone at once, and it tells
//!   jobs the executors' task slots ([`cluster_slots`]).
//! - `demo`: the CTR job on generated click logs (`angel_runner::demo`).
//! - [`access`]: the token and TLS flags of the service roles.
//! - `bench ps`, `bench e2e`, `bench codec`, ...: benchmark tables (`angel_bench`).

pub mod access;
pub mod cluster_slots;
pub mod drop;
pub mod executor;
pub mod executor_probe;
pub mod scheduler;
pub mod service;
pub mod snapshot;
pub mod stall_watchdog;

use std::process::ExitCode;

use angel_bench as bench;
use angel_runner::{demo, run, status};

use clap::{Parser, Subcommand};

/// A parameter server offered as a service.
#[derive(Debug, Parser)]
#[command(name = "angel-ps", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the master: the coordinator servers register with and clients ask for routes.
    Master(service::MasterArgs),
    /// Run one parameter server that registers with a master.
    Server(service::ServerArgs),
    /// Run a master and N servers in this process on 127.0.0.1, until Ctrl-C or SIGTERM.
    Standalone(service::StandaloneArgs),
    /// Show servers, matrices and partition sizes of a running service.
    Status(status::StatusOptions),
    /// Have every server write a snapshot of the partitions that changed, now.
    Snapshot(snapshot::SnapshotArgs),
    /// Remove every matrix and counter of a namespace (what a killed job left).
    Drop(drop::DropArgs),
    /// Print a fresh random service token (256 bits as hex), for `--token-file`.
    Token,
    /// Run a SQL job file (ETL, counter, training, evaluation) on embedded DataFusion, or
    /// with --ballista on a Ballista cluster.
    Run(run::RunOptions),
    /// Run a Ballista scheduler that knows the angel-ps functions.
    Scheduler(scheduler::SchedulerArgs),
    /// Run a Ballista executor that runs the angel-ps functions.
    Executor(executor::ExecutorArgs),
    /// The main job: generate click logs and run the CTR SQL job on an embedded service.
    Demo(demo::DemoCommand),
    /// Benchmarks; each prints a table.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

/// Parses the command line, runs the command and maps errors to exit code 1.
pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // Deep plans (DataFusion plans expressions by recursion) need more than the default 2 MiB
    // of a worker's stack; statements are bounded too (`angel_sql::job::statement`).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(16 << 20)
        .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: Result<(), Box<dyn std::error::Error>> = runtime.block_on(async move {
        match cli.command {
            Command::Master(args) => Ok(service::master(args).await?),
            Command::Server(args) => Ok(service::server(args).await?),
            Command::Standalone(args) => Ok(service::standalone(args).await?),
            Command::Status(args) => Ok(status::run(args).await?),
            Command::Snapshot(args) => Ok(snapshot::run(args).await?),
            Command::Drop(args) => Ok(drop::run(args).await?),
            Command::Token => {
                println!("{}", angel_ps_service::auth::generate_token());
                Ok(())
            }
            Command::Run(args) => run::run(args).await,
            Command::Scheduler(args) => scheduler::run(args).await,
            Command::Executor(args) => executor::run(args).await,
            Command::Demo(args) => demo::run(args).await,
            Command::Bench(command) => bench::run(command).await,
        }
    });
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    };
    // Tasks of a failed statement may still wait on a service that is gone (a call to the
    // master retries for a minute): the command's answer is given, so they get a moment, not
    // that minute.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}
