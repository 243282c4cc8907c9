//! [`Jobs`]: the runs of jobs (`angel-ps run`) on the service, so that a killed job resumes
//! and two runs of one job never interleave. This is Angel's worker recovery: a new worker
//! "retrieves the current status (such as the iteration index) from the master and the latest
//! parameters from the PS".
//!
//! A job is named by its namespace and a hash of its text after variables. A run takes the job
//! at its start and holds it by renewing a lease. Another run of the same job is refused while
//! the lease holds (both would replace and fill the same counters and models), and takes the
//! job over once it lapses: the holder was killed. The record keeps how far the job got: the
//! statements completed and the epochs completed of the next one. A run that ends, succeeded
//! or failed (a statement's error), removes it; only a killed run leaves it, for the next run
//! to resume from. Records are saved with the master's state.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use angel_proto::{JobPhase, JobRecord, JobReply, JobRequest, PsError, Result, namespace};
use parking_lot::Mutex;

/// How long a run may go unheard before another run of its job takes it over.
pub use angel_proto::limits::JOB_LEASE as LEASE;

/// Records kept per namespace: a new job past it drops the record of the namespace's killed
/// run unheard longest.
const MAX_PER_NAMESPACE: usize = 1_024;
/// Records kept in all: a new job past it drops the record of the killed run unheard
/// longest (runs without `--namespace` get a fresh namespace each).
const MAX_JOBS: usize = 65_536;
/// Longest job name.
const MAX_NAME: usize = 256;

/// Every job's record; see the module documentation.
#[derive(Debug)]
pub struct Jobs {
    records: Mutex<BTreeMap<String, Record>>,
    lease: Duration,
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs::with_lease(LEASE)
    }
}

/// One job: the run holding it, when it was last heard, and how far the job got.
#[derive(Debug, Clone)]
struct Record {
    run: u64,
    heard: Instant,
    statements: u32,
    epochs: u32,
}

impl Record {
    fn new(run: u64) -> Self {
        Record {
            run,
            heard: Instant::now(),
            statements: 0,
            epochs: 0,
        }
    }
}

impl Jobs {
    /// Jobs whose runs are taken for dead after `lease` unheard.
    pub fn with_lease(lease: Duration) -> Self {
        Jobs {
            records: Mutex::default(),
            lease,
        }
    }

    /// Handles `request`: see [`JobPhase`]'s phases.
    pub fn handle(&self, r: &JobRequest) -> Result<JobReply> {
        if r.job.is_empty() || r.job.len() > MAX_NAME {
            return Err(PsError::InvalidArgument(format!(
                "job: a job's name has 1 to {MAX_NAME} bytes, this one {}",
                r.job.len()
            )));
        }
        match r.phase() {
            JobPhase::Start => self.start(r),
            JobPhase::Renew | JobPhase::Progress => self.hold(r),
            JobPhase::End => self.end(r),
            JobPhase::Unspecified => Err(PsError::InvalidArgument(
                "job: the request names no phase".into(),
            )),
        }
    }

    /// Takes the job for `r.run` unless another run holds it; answers how far it got.
    fn start(&self, r: &JobRequest) -> Result<JobReply> {
        let mut records = self.records.lock();
        if let Some(held) = records.get(&r.job)
            && held.run != r.run
            && held.heard.elapsed() < self.lease
        {
            return Err(PsError::AlreadyExists(format!(
                "job '{}' is running already (its run was heard from {:.1} s ago): two runs of \
                 one job in one namespace would replace and fill the same counters and models. \
                 Wait for it to end (a run unheard for {} s is taken for killed, and this job \
                 then resumes where it stopped), or run this one in another namespace \
                 (--namespace)",
                r.job,
                held.heard.elapsed().as_secs_f64(),
                self.lease.as_secs()
            )));
        }
        let record = self.held(&mut records, r)?;
        (record.run, record.heard) = (r.run, Instant::now());
        Ok(JobReply {
            statements: record.statements,
            epochs: record.epochs,
        })
    }

    /// Renews the run's lease and, with [`JobPhase::Progress`], records its progress.
    fn hold(&self, r: &JobRequest) -> Result<JobReply> {
        let mut records = self.records.lock();
        let record = self.held(&mut records, r)?;
        if record.run != r.run {
            return Err(taken_over(&r.job));
        }
        record.heard = Instant::now();
        if r.phase() == JobPhase::Progress {
            (record.statements, record.epochs) = (r.statements, r.epochs);
        }
        Ok(JobReply::default())
    }

    /// The run ended: the job is forgotten.
    fn end(&self, r: &JobRequest) -> Result<JobReply> {
        let mut records = self.records.lock();
        match records.get(&r.job) {
            Some(record) if record.run != r.run => Err(taken_over(&r.job)),
            _ => {
                records.remove(&r.job);
                Ok(JobReply::default())
            }
        }
    }

    /// The record of `r.job`, made for `r.run` when there is none (a new job, or one a
    /// master restarted without its state forgot).
    fn held<'a>(
        &self,
        records: &'a mut BTreeMap<String, Record>,
        r: &JobRequest,
    ) -> Result<&'a mut Record> {
        if !records.contains_key(&r.job) {
            self.make_room(records, &r.job)?;
        }
        Ok(records.entry(r.job.clone()).or_insert(Record::new(r.run)))
    }

    /// Makes room for a new record of `job`: past [`MAX_PER_NAMESPACE`] records in its
    /// namespace (or [`MAX_JOBS`] in all), the record of the killed run unheard longest there
    /// goes; when every run is alive, the job is refused.
    fn make_room(&self, records: &mut BTreeMap<String, Record>, job: &str) -> Result<()> {
        let space = namespace::split(job).0;
        let same = |name: &String| namespace::split(name).0 == space;
        let full_here = records.keys().filter(|name| same(name)).count() >= MAX_PER_NAMESPACE;
        if !full_here && records.len() < MAX_JOBS {
            return Ok(());
        }
        let oldest = (records.iter())
            .filter(|(name, r)| (!full_here || same(name)) && r.heard.elapsed() >= self.lease)
            .min_by_key(|(_, r)| r.heard)
            .map(|(name, _)| name.clone());
        match oldest {
            Some(name) => {
                records.remove(&name);
                Ok(())
            }
            None => Err(PsError::TooLarge(format!(
                "job '{job}': {} jobs are running (at most {MAX_PER_NAMESPACE} a namespace, \
                 {MAX_JOBS} in all)",
                records.len()
            ))),
        }
    }

    /// Every job's record, as the master's state saves them.
    pub fn records(&self) -> Vec<JobRecord> {
        (self.records.lock().iter())
            .map(|(job, r)| JobRecord {
                job: job.clone(),
                run: r.run,
                statements: r.statements,
                epochs: r.epochs,
            })
            .collect()
    }

    /// Resumes saved records, replacing any held, each with a fresh lease: its run may still
    /// be alive and renew.
    pub fn resume(&self, saved: Vec<JobRecord>) {
        *self.records.lock() = (saved.into_iter())
            .map(|r| {
                let record = Record {
                    statements: r.statements,
                    epochs: r.epochs,
                    ..Record::new(r.run)
                };
                (r.job, record)
            })
            .collect();
    }
}

/// The refusal of a call of a run whose job another run took over.
fn taken_over(job: &str) -> PsError {
    PsError::WrongState(format!(
        "job '{job}' was taken over by a later run (this run was unheard past its lease, as a \
         killed run is); this run stops"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(jobs: &Jobs, job: &str, phase: JobPhase, run: u64) -> Result<JobReply> {
        let request = JobRequest {
            job: job.into(),
            phase: phase as i32,
            run,
            statements: 3,
            epochs: 2,
        };
        jobs.handle(&request)
    }

    /// A second run is refused while the first is heard from, takes the job over once the
    /// first goes unheard past the lease, and then the first run's calls are refused.
    #[test]
    fn one_run_holds_a_job_until_its_lease_lapses() {
        let jobs = Jobs::with_lease(Duration::from_millis(300));
        let job = "team/job-1";
        call(&jobs, job, JobPhase::Start, 1).unwrap();
        call(&jobs, job, JobPhase::Start, 1).expect("a retried start of the same run");
        let refused = call(&jobs, job, JobPhase::Start, 2)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("running already"), "{refused}");
        std::thread::sleep(Duration::from_millis(150));
        call(&jobs, job, JobPhase::Renew, 1).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            call(&jobs, job, JobPhase::Start, 2).is_err(),
            "renewed, still held"
        );
        std::thread::sleep(Duration::from_millis(350));
        call(&jobs, job, JobPhase::Start, 2).expect("taken over once the lease lapsed");
        for phase in [JobPhase::Renew, JobPhase::Progress, JobPhase::End] {
            let refused = call(&jobs, job, phase, 1).unwrap_err().to_string();
            assert!(refused.contains("taken over"), "{refused}");
        }
    }

    /// A killed run's progress is answered to the next run, survives a restart of the
    /// master, and is forgotten once a run ends.
    #[test]
    fn a_killed_runs_progress_is_kept_until_a_run_ends() {
        let jobs = Jobs::with_lease(Duration::ZERO);
        let job = "team/job-1";
        assert_eq!(
            call(&jobs, job, JobPhase::Start, 1).unwrap(),
            JobReply::default()
        );
        call(&jobs, job, JobPhase::Progress, 1).unwrap();
        let resumed = Jobs::with_lease(Duration::ZERO);
        resumed.resume(jobs.records());
        assert_eq!(resumed.records(), jobs.records());
        let reply = call(&resumed, job, JobPhase::Start, 2).unwrap();
        assert_eq!((reply.statements, reply.epochs), (3, 2));
        call(&resumed, job, JobPhase::End, 2).unwrap();
        assert!(resumed.records().is_empty());
        let fresh = call(&resumed, job, JobPhase::Start, 3).unwrap();
        assert_eq!(fresh, JobReply::default());
    }

    /// A namespace full of live runs refuses one more job; a killed run's record makes room,
    /// and another namespace has room of its own.
    #[test]
    fn a_namespace_holds_a_bounded_number_of_jobs() {
        let jobs = Jobs::with_lease(Duration::from_secs(60));
        for i in 0..MAX_PER_NAMESPACE {
            call(&jobs, &format!("a/job-{i}"), JobPhase::Start, 1).unwrap();
        }
        assert!(call(&jobs, "a/one-more", JobPhase::Start, 1).is_err());
        call(&jobs, "b/other-team", JobPhase::Start, 1).expect("room of its own");
        let killed = "a/job-7";
        let long_ago = Instant::now()
            .checked_sub(Duration::from_secs(120))
            .unwrap();
        jobs.records.lock().get_mut(killed).unwrap().heard = long_ago;
        call(&jobs, "a/one-more", JobPhase::Start, 1).unwrap();
        assert!(jobs.records().iter().all(|r| r.job != killed));
    }
}
