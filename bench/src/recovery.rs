//! `angel-ps bench recovery`: what losing a server costs a training loop, on a service of
//! real processes (a master with a snapshot directory and two servers on 127.0.0.1).
//!
//! Per model size: the time to write a snapshot and the longest pause it holds a partition
//! still; then a loop of mini-batch steps (a pruned pull and a push of gradients) runs, one
//! server is killed with SIGKILL, and the table shows when the master declared it dead, when
//! its partitions were loaded elsewhere, and when the first step after the kill finished
//! (recovery included: the client's report, the master's probe, the restore and the replay of
//! changes newer than the snapshot). Last, the same steps run on a service without snapshots
//! and on one snapshotting every `--snapshot-interval-secs`, for the overhead.

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use angel_client::{MatrixSpec, PsClient};
use angel_local_cluster::Process;
use angel_runner::output::Output;
use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::Table;
use super::ps::progress;

/// Flags of `angel-ps bench recovery`.
#[derive(Debug, Args)]
pub struct RecoveryBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Model sizes (distinct keys), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    pub keys: Vec<u64>,
    /// Distinct keys per training step (one pull and one push).
    #[arg(long, default_value_t = 10_000)]
    pub batch: usize,
    /// Seconds the training loop runs without snapshots; the run with snapshots then takes
    /// the same number of steps.
    #[arg(long, default_value_t = 30.0)]
    pub epoch_secs: f64,
    /// Seconds between snapshots in the overhead run.
    #[arg(long, default_value_t = 10.0)]
    pub snapshot_interval_secs: f64,
    /// Also write the table, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The matrix every run trains.
const MATRIX: &str = "bench_recovery";

/// Runs `bench recovery` and prints (and optionally writes) the tables.
pub async fn run(args: RecoveryBenchArgs) -> Result<(), Box<dyn Error>> {
    let binary = std::env::current_exe()?;
    let mut recovery = Vec::new();
    let mut overhead = Vec::new();
    for &keys in &args.keys {
        recovery.push(measure_recovery(&binary, keys, &args).await?);
        overhead.push(measure_overhead(&binary, keys, &args).await?);
    }
    let recovery = Table::new(
        &[
            "keys",
            "snapshot MB",
            "snapshot write ms",
            "longest pause ms",
            "kill → declared dead ms",
            "kill → partitions loaded ms",
            "kill → first step done ms",
            "changes replayed",
            "changes lost",
        ],
        recovery,
    );
    let overhead = Table::new(
        &[
            "keys",
            "steps",
            "no snapshots s",
            "snapshots s",
            "snapshots written",
            "overhead",
            "slowest step, no snapshots ms",
            "slowest step, snapshots ms",
        ],
        overhead,
    );
    super::show(
        args.output,
        &[("recovery", &recovery), ("overhead", &overhead)],
        &[],
    );
    if let Some(path) = &args.out {
        let text = format!("{}\n{}", recovery.markdown(), overhead.markdown());
        super::write(path, &text)?;
    }
    Ok(())
}

/// A master (with `master_args`) and two servers, as processes of this binary.
struct Service {
    master: Process,
    servers: Vec<Process>,
}

impl Service {
    fn start(binary: &std::path::Path, master_args: &[&str]) -> Result<Service, Box<dyn Error>> {
        let mut args = vec!["master", "--bind", "127.0.0.1:0"];
        args.extend_from_slice(master_args);
        let master = Process::spawn(binary, &args)?;
        let servers = (0..2)
            .map(|_| Process::spawn(binary, &["server", "--master", &master.addr]))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Service { master, servers })
    }
}

/// Creates the model and pushes every key once, so snapshots hold `keys` keys.
async fn fill(client: &PsClient, keys: u64) -> Result<(), Box<dyn Error>> {
    client
        .create_matrix(MatrixSpec::sparse(MATRIX, 1, keys))
        .await?;
    let chunk = 200_000u64;
    let bar = progress(keys.div_ceil(chunk), &format!("{keys} keys: filling"));
    for start in (0..keys).step_by(chunk as usize) {
        let batch: Vec<u64> = (start..(start + chunk).min(keys)).collect();
        client
            .push_keys(MATRIX, 0, &batch, &vec![0.01f32; batch.len()])
            .await?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// One training step: a pull of `batch` random keys and a push of a gradient for each.
async fn step(
    client: &PsClient,
    rng: &mut StdRng,
    keys: u64,
    batch: usize,
) -> angel_client::Result<()> {
    let mut picked: Vec<u64> = (0..batch).map(|_| rng.random_range(0..keys)).collect();
    picked.sort_unstable();
    picked.dedup();
    let weights = client.pull_keys::<f32>(MATRIX, 0, &picked).await?;
    let grads: Vec<f32> = weights.iter().map(|w| 0.001 * (w - 0.5)).collect();
    client.push_keys(MATRIX, 0, &picked, &grads).await
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Snapshot figures, then a server killed under a training loop: one row of the table.
async fn measure_recovery(
    binary: &std::path::Path,
    keys: u64,
    args: &RecoveryBenchArgs,
) -> Result<Vec<String>, Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let snapshot_dir = dir.path().to_string_lossy().to_string();
    // Snapshots only on request here, so the kill finds changes newer than the snapshot.
    let mut service = Service::start(
        binary,
        &[
            "--snapshot-dir",
            &snapshot_dir,
            "--snapshot-interval-secs",
            "86400",
        ],
    )?;
    let client = PsClient::connect(&service.master.addr).await?;
    fill(&client, keys).await?;
    let snapshot = client.snapshot().await?;
    let mut rng = StdRng::seed_from_u64(keys);
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(1) {
        step(&client, &mut rng, keys, args.batch).await?;
    }
    let victim = service.servers[1].addr.clone();
    let victim_id = client
        .status()
        .await?
        .servers
        .iter()
        .find(|s| s.addr == victim)
        .map(|s| s.server_id)
        .ok_or_else(|| format!("server {victim} is not in the status"))?;
    let (killed_at, killed_ms) = (Instant::now(), unix_ms());
    service.servers[1].kill();
    step(&client, &mut rng, keys, args.batch).await?;
    let resumed = killed_at.elapsed();
    let status = client.status().await?;
    let recovery = status
        .recoveries
        .iter()
        .find(|r| r.server_id == victim_id)
        .ok_or("the master recorded no recovery of the killed server")?;
    if !recovery.error.is_empty() {
        return Err(recovery.error.clone().into());
    }
    let (replayed, lost) = client.replay_counts();
    let declared = (recovery.at_unix_ms - recovery.millis).saturating_sub(killed_ms);
    Ok(vec![
        keys.to_string(),
        format!("{:.1}", snapshot.bytes as f64 / 1e6),
        snapshot.millis.to_string(),
        format!("{:.1}", snapshot.max_pause_us as f64 / 1e3),
        declared.to_string(),
        recovery.at_unix_ms.saturating_sub(killed_ms).to_string(),
        resumed.as_millis().to_string(),
        replayed.to_string(),
        lost.to_string(),
    ])
}

/// The same steps on a service without snapshots and on one snapshotting every interval.
async fn measure_overhead(
    binary: &std::path::Path,
    keys: u64,
    args: &RecoveryBenchArgs,
) -> Result<Vec<String>, Box<dyn Error>> {
    let base = train(binary, keys, args, &[], Steps::For(args.epoch_secs)).await?;
    let dir = tempfile::tempdir()?;
    let snapshot_dir = dir.path().to_string_lossy().to_string();
    let interval = args.snapshot_interval_secs.to_string();
    let master_args = [
        "--snapshot-dir",
        snapshot_dir.as_str(),
        "--snapshot-interval-secs",
        interval.as_str(),
    ];
    let snap = train(binary, keys, args, &master_args, Steps::Count(base.steps)).await?;
    Ok(vec![
        keys.to_string(),
        base.steps.to_string(),
        format!("{:.2}", base.took.as_secs_f64()),
        format!("{:.2}", snap.took.as_secs_f64()),
        snap.snapshots.to_string(),
        format!(
            "{:+.1}%",
            100.0 * (snap.took.as_secs_f64() / base.took.as_secs_f64() - 1.0)
        ),
        base.slowest.as_millis().to_string(),
        snap.slowest.as_millis().to_string(),
    ])
}

/// How long a training run goes.
enum Steps {
    For(f64),
    Count(u64),
}

/// What a training run measured.
struct Run {
    steps: u64,
    took: Duration,
    slowest: Duration,
    snapshots: u64,
}

/// Fills a fresh service started with `master_args` and times training steps on it.
async fn train(
    binary: &std::path::Path,
    keys: u64,
    args: &RecoveryBenchArgs,
    master_args: &[&str],
    steps: Steps,
) -> Result<Run, Box<dyn Error>> {
    let service = Service::start(binary, master_args)?;
    let client: Arc<PsClient> = PsClient::connect(&service.master.addr).await?;
    fill(&client, keys).await?;
    let before = snapshots_written(&client).await?;
    let mut rng = StdRng::seed_from_u64(keys);
    let (started, mut done, mut slowest) = (Instant::now(), 0u64, Duration::ZERO);
    let label = match master_args.is_empty() {
        true => "no snapshots",
        false => "snapshots",
    };
    let bar = progress(
        match steps {
            Steps::Count(n) => n,
            Steps::For(_) => 0,
        },
        &format!("{keys} keys: training, {label}"),
    );
    loop {
        let finished = match steps {
            Steps::For(secs) => started.elapsed().as_secs_f64() >= secs,
            Steps::Count(n) => done >= n,
        };
        if finished {
            break;
        }
        let t = Instant::now();
        step(&client, &mut rng, keys, args.batch).await?;
        slowest = slowest.max(t.elapsed());
        done += 1;
        bar.inc(1);
    }
    let took = started.elapsed();
    bar.finish_and_clear();
    let snapshots = snapshots_written(&client).await? - before;
    drop(service);
    Ok(Run {
        steps: done,
        took,
        slowest,
        snapshots,
    })
}

/// Snapshots written so far, counted as the most any one partition has had.
async fn snapshots_written(client: &PsClient) -> Result<u64, Box<dyn Error>> {
    let status = client.status().await?;
    Ok(status
        .servers
        .iter()
        .flat_map(|s| &s.partitions)
        .map(|p| p.snapshots)
        .max()
        .unwrap_or(0))
}
