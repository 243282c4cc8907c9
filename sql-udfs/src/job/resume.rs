//! [`Resume`]: a run's hold on its job at the master, and what earlier runs of the job
//! completed, so that a killed job run again resumes (Angel's worker recovery) and two runs
//! of one job never interleave.
//!
//! A job is its text after variables, in its namespace (`job-<hash>` on the service). A run
//! takes it at the start ([`JobPhase::Start`]; refused while another run holds it), renews
//! its hold while it runs, and records each statement it completes and each epoch a training
//! statement completes. A later run of the same job after one that was killed is told how far
//! that one got:
//! - statements completed that write a model on the servers (`CREATE MODEL`, `TRAIN MODEL`,
//!   `LOAD MODEL`) are skipped: the model is there;
//! - every other completed statement runs again, for the tables and views it makes (counters
//!   start afresh each run and are filled again, to the same indices);
//! - the statement that was running resumes: a model trained by epochs goes on after its last
//!   completed epoch with the weights and optimizer state the servers hold; one trained
//!   otherwise (L-BFGS, trees, topics, clusters) is trained again from the start (a
//!   `CREATE MODEL` dropping first the model it made, known by its training description).
//!
//! A run that ends, succeeded or failed on a statement's error, forgets the job: running it
//! again runs it whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use angel_client::PsClient;
use angel_proto::limits::JOB_LEASE;
use angel_proto::{JobPhase, JobRequest, PsError};
use datafusion::common::{DataFusionError, Result};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use xxhash_rust::xxh3::xxh3_64;

use crate::bridge::ps_error;

/// How long past a lease a new run waits for a run holding its job: the holder, if killed,
/// is unheard for a lease by then.
const HELD_MARGIN: Duration = Duration::from_secs(1);

/// See the module documentation.
pub struct Resume {
    client: Arc<PsClient>,
    job: String,
    run: u64,
    /// What earlier runs completed: the first `.0` statements, and `.1` epochs of the next.
    earlier: (usize, usize),
    /// The statements this run has completed.
    statements: AtomicU32,
    /// Whether the master holds the job for this run: not when the run's token may not name
    /// it (a token limited to namespaces, and a job in none of them), which then runs
    /// without a hold, as before jobs had one.
    held: bool,
    renewer: JoinHandle<()>,
    /// Why this run lost its hold on the job, once it has.
    lost: Arc<Mutex<Option<String>>>,
}

/// What a run does with a statement, given what earlier runs did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Run it as usual.
    Run,
    /// An earlier run completed it.
    Done,
    /// An earlier run was running it and completed this many epochs.
    Resume(usize),
}

impl Resume {
    /// Takes the job of `text` (after variables) for a new run. A run holding it is waited
    /// for one lease (a run killed just before is then taken for killed); the error names
    /// the job when its run is still alive.
    pub async fn start(client: Arc<PsClient>, text: &str) -> Result<Resume> {
        let job = format!("job-{:016x}", xxh3_64(text.as_bytes()));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let run = xxh3_64(format!("{}:{}", std::process::id(), now.as_nanos()).as_bytes()).max(1);
        let asked = Instant::now();
        let (held, reply) = loop {
            match client.job(request(&job, run, JobPhase::Start)).await {
                Err(PsError::PermissionDenied(why)) => {
                    tracing::debug!(job, "the job runs without a hold: {why}");
                    break (false, Default::default());
                }
                Err(PsError::AlreadyExists(_)) if asked.elapsed() < JOB_LEASE + HELD_MARGIN => {
                    tracing::info!(
                        job,
                        "another run holds the job; waiting for its hold to lapse"
                    );
                    tokio::time::sleep(JOB_LEASE / 20).await;
                }
                reply => break (true, reply.map_err(ps_error)?),
            }
        };
        let lost = Arc::new(Mutex::new(None));
        let renewer = match held {
            true => tokio::spawn(renew(client.clone(), job.clone(), run, lost.clone())),
            false => tokio::spawn(async {}),
        };
        Ok(Resume {
            client,
            job,
            run,
            earlier: (reply.statements as usize, reply.epochs as usize),
            statements: AtomicU32::new(0),
            held,
            renewer,
            lost,
        })
    }

    /// What earlier runs completed: statements, and epochs of the next.
    pub fn earlier(&self) -> (usize, usize) {
        self.earlier
    }

    /// What this run does with its statement number `index` (from 0).
    pub fn step(&self, index: usize) -> Step {
        match index.cmp(&self.earlier.0) {
            std::cmp::Ordering::Less => Step::Done,
            std::cmp::Ordering::Equal if self.earlier != (0, 0) => Step::Resume(self.earlier.1),
            _ => Step::Run,
        }
    }

    /// An error once another run took the job over: this run must stop.
    pub fn check(&self) -> Result<()> {
        match self.lost.lock().clone() {
            Some(why) => Err(DataFusionError::Execution(why)),
            None => Ok(()),
        }
    }

    /// Records that the statements before `index + 1` are complete.
    pub async fn statement_done(&self, index: usize) -> Result<()> {
        let done = index as u32 + 1;
        self.statements.store(done, Ordering::Relaxed);
        self.progress(done, 0).await
    }

    /// Records that the running statement completed epoch `epoch`.
    pub async fn epoch_done(&self, epoch: usize) -> Result<()> {
        let statements = self.statements.load(Ordering::Relaxed);
        self.progress(statements, epoch as u32).await
    }

    async fn progress(&self, statements: u32, epochs: u32) -> Result<()> {
        if !self.held {
            return Ok(());
        }
        let request = JobRequest {
            statements,
            epochs,
            ..request(&self.job, self.run, JobPhase::Progress)
        };
        match self.client.job(request).await {
            Ok(_) => Ok(()),
            Err(PsError::WrongState(why)) => {
                *self.lost.lock() = Some(why.clone());
                Err(DataFusionError::Execution(why))
            }
            Err(e) => Err(ps_error(e)),
        }
    }

    /// Ends the run, succeeded or failed: the job is forgotten, and running it again runs it
    /// whole. A master that cannot be told is logged: the run's lease lapses anyway, and the
    /// next run resumes as after a kill.
    pub async fn end(&self) {
        self.renewer.abort();
        if !self.held {
            return;
        }
        let request = request(&self.job, self.run, JobPhase::End);
        if let Err(e) = self.client.job(request).await {
            tracing::warn!(job = self.job, "the master did not hear the job's end: {e}");
        }
    }
}

impl Drop for Resume {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// A request of `phase` for `run` of `job`.
fn request(job: &str, run: u64, phase: JobPhase) -> JobRequest {
    JobRequest {
        job: job.to_string(),
        phase: phase as i32,
        run,
        ..JobRequest::default()
    }
}

/// Renews the run's hold five times per lease until the run ends or loses the job; a master
/// that cannot be reached is asked again (the client retries while it restarts).
async fn renew(client: Arc<PsClient>, job: String, run: u64, lost: Arc<Mutex<Option<String>>>) {
    loop {
        tokio::time::sleep(JOB_LEASE / 5).await;
        match client.job(request(&job, run, JobPhase::Renew)).await {
            Ok(_) => {}
            Err(PsError::WrongState(why)) => {
                *lost.lock() = Some(why);
                return;
            }
            Err(e) => tracing::warn!(job, "cannot renew the job's hold on the master: {e}"),
        }
    }
}
