//! Model rotation's schedule across a fault of the master in the middle of a round: killed and
//! started again on its address and snapshot directory, or frozen (SIGSTOP) and woken. Its
//! workers retry or wait meanwhile and go on where they were. Each step of a worker adds 1 to the cell (slice,
//! rank) of a probe matrix, so after the rounds every cell must hold the number of rounds
//! exactly: below, a step was skipped; above, a step was trained twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_client::{MatrixSpec, PsClient, RotatePhase, RotateReply, RotateRequest, Sync, Training};
use parking_lot::Mutex;
use tokio::sync::Barrier;

use super::Outcome;
use super::lab::{Lab, Result, connect, ensure, free_addr, signal};
use super::probe::Tally;

/// The rotating model's workers, and its slices (two per worker).
const WORKERS: u32 = 2;
const SLICES: u32 = 2 * WORKERS;
/// Rounds the workers rotate.
const ROUNDS: u32 = 4;
/// How long a step trains: long enough for the kill to land in the middle of a round.
const STEP: Duration = Duration::from_millis(40);
/// How long the workers may take in all.
const LIMIT: Duration = Duration::from_secs(120);

/// What befalls the master in the middle of a round.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGKILL, then a new master on the same address and directory.
    Killed,
    /// SIGSTOP for a few seconds, then SIGCONT.
    Frozen,
}

/// Kills the master once a round is done and the next has begun, starts it again on its
/// directory, and checks every step of every round was trained exactly once.
pub async fn master_killed(lab: &Lab) -> Result<Outcome> {
    around(lab, Fault::Killed).await
}

/// Freezes the master for 3 s once a round is done and the next has begun, wakes it, and
/// checks every step of every round was trained exactly once.
pub async fn master_frozen(lab: &Lab) -> Result<Outcome> {
    around(lab, Fault::Frozen).await
}

/// Rotates [`ROUNDS`] rounds with `fault` befalling the master in the second, and tallies
/// the probe's cells.
async fn around(lab: &Lab, fault: Fault) -> Result<Outcome> {
    let bind = free_addr()?;
    let mut master = lab.master(&bind, true, "30", &[])?;
    let _servers = lab.servers(&bind, 2)?;
    let c = connect(&bind).await?;
    let training = Training {
        sync: Some(Sync {
            workers: WORKERS,
            rotation_slices: SLICES,
            ..Sync::default()
        }),
        ..Training::default()
    };
    let spec = MatrixSpec::dense("rotated", u64::from(SLICES), u64::from(WORKERS));
    c.create_matrix(spec.training(training)).await?;

    let steps: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let barrier = Arc::new(Barrier::new(WORKERS as usize));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (c, steps, barrier) = (c.clone(), steps.clone(), barrier.clone());
            tokio::spawn(async move { rotate(&c, u64::from(w), &steps, &barrier).await })
        })
        .collect();
    let started = Instant::now();
    while steps.lock().len() <= (WORKERS * SLICES) as usize {
        ensure(started.elapsed() < LIMIT, || {
            "the first round never ended".into()
        })?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _restarted = match fault {
        Fault::Killed => {
            master.kill();
            Some(lab.master(&bind, true, "30", &[])?)
        }
        Fault::Frozen => {
            signal(&master, "STOP")?;
            tokio::time::sleep(Duration::from_secs(3)).await;
            signal(&master, "CONT")?;
            None
        }
    };
    let back = Instant::now();
    for worker in workers {
        tokio::time::timeout(LIMIT, worker).await???;
    }
    let first_after = (steps.lock().iter())
        .filter(|&&at| at > back)
        .min()
        .copied();
    let recovery = first_after.map_or(Duration::ZERO, |at| at - back);
    let mut cells = Vec::new();
    for slice in 0..u64::from(SLICES) {
        let ranks: Vec<u64> = (0..u64::from(WORKERS)).collect();
        cells.extend(c.pull_keys::<f32>("rotated", slice, &ranks).await?);
    }
    let tally = Tally::of(&cells, ROUNDS as f32);
    Ok(Outcome { tally, recovery })
}

/// Worker `w`'s rounds: each round a new task (as each epoch's), joining, then at each step
/// taking its slice, adding 1 at (slice, rank), and handing the slice back; the workers meet
/// at `barrier` between rounds, as a statement's epochs follow one another.
async fn rotate(
    c: &PsClient,
    w: u64,
    steps: &Mutex<Vec<Instant>>,
    barrier: &Barrier,
) -> Result<()> {
    for round in 0..u64::from(ROUNDS) {
        let worker = 1 + w + 100 * round;
        let ask = |phase: RotatePhase, step: u32| RotateRequest {
            model: "rotated".into(),
            worker,
            phase: phase as i32,
            step,
            run: worker,
            ..RotateRequest::default()
        };
        let joined: RotateReply = c.rotate(ask(RotatePhase::Join, 0)).await?;
        for step in 0..joined.slices {
            let lease = c.rotate(ask(RotatePhase::Acquire, step)).await?;
            tokio::time::sleep(STEP).await;
            let (row, rank) = (u64::from(lease.slice), u64::from(joined.rank));
            c.push_keys("rotated", row, &[rank], &[1.0f32]).await?;
            c.rotate(ask(RotatePhase::Release, step)).await?;
            steps.lock().push(Instant::now());
        }
        c.rotate(ask(RotatePhase::Leave, 0)).await?;
        barrier.wait().await;
    }
    Ok(())
}
