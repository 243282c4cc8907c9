//! A Ballista executor SIGKILLed (or frozen by SIGSTOP) in the middle of a pass that trains and
//! counts. Ballista runs its tasks again on the executor left (its finished tasks too, whose
//! shuffle output is lost with it), and the servers refuse what the first runs had sent: every change of a task is named
//! after the job, the stage, the task's partition and the change's number (docs/cluster.md).
//! The same job run first without the failure, on the same cluster in another namespace, is
//! the reference: every value must be counted once and every mini-batch applied once.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use angel_client::{PsClient, worker_pid};
use angel_local_cluster::{LocalCluster, Options};
use angel_proto::StatusReply;

use super::Outcome;
use super::lab::{Lab, Result, connect, ensure, signal};
use super::probe::Tally;

/// Trains a hashed-feature model for one epoch, then runs one more pass that also counts
/// three columns' values, and seals the counter so its counts can be read.
pub const JOB: &str = "
CREATE TABLE train AS SELECT label,
  ps_hash(make_array(c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13), 18) AS idx,
  make_array(c1, c2, c3) AS features
FROM read_csv('${data}', 'header=true');
CREATE MODEL m OPTIONS (kind = 'logistic', dim = 262144, epochs = 1, batch_size = 256)
  AS SELECT label, idx FROM train;
SELECT ps_train('m', label, idx) AS loss, ps_counter_add('seen', features) AS counted FROM train;
SELECT ps_counter_seal('seen', 1) AS seen;
";

/// Rows of the job's click log.
const ROWS: u64 = 60_000;
/// The job's partitions: its tasks per stage.
const PARTITIONS: usize = 8;
/// How long a run of the job may take.
const LIMIT: Duration = Duration::from_secs(300);

/// What befalls an executor in the middle of the pass.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGKILL: its data port refuses connections, and the scheduler removes it at once.
    Killed,
    /// SIGSTOP for good: its ports still accept connections, so only its silence (the
    /// scheduler's `--executor-timeout-secs`) tells it is gone.
    Frozen,
}

/// [`JOB`] with an executor SIGKILLed in the counting pass, tallied against a run without.
pub async fn executor_killed(lab: &Lab) -> Result<Outcome> {
    around(lab, Fault::Killed).await
}

/// [`JOB`] with an executor frozen in the counting pass, tallied against a run without.
pub async fn executor_frozen(lab: &Lab) -> Result<Outcome> {
    around(lab, Fault::Frozen).await
}

/// Runs [`JOB`] in namespace `ref`, then again in namespace `t` with `fault` befalling an
/// executor once it has trained in the counting pass, and tallies the second run's counts and
/// applied mini-batches against the first's.
async fn around(lab: &Lab, fault: Fault) -> Result<Outcome> {
    let data = lab.dir().join("ctr.csv");
    angel_datagen::ctr_data::generate(&data, ROWS, 11)?;
    let job = lab.dir().join("job.sql");
    std::fs::write(&job, JOB)?;
    // A stall bound of 5 s: Ballista's scheduler sometimes runs nothing more after losing an
    // executor (docs/cluster.md); the watchdog cancels such a job and the client submits it
    // again under the same change names.
    let options = Options {
        scheduler_args: ["--executor-timeout-secs", "3", "--stall-secs", "5"]
            .map(String::from)
            .to_vec(),
        ..Options::default()
    };
    let mut cluster = LocalCluster::start_with(lab.binary(), 2, 2, 1, &options)?;
    let c = connect(&cluster.master.addr).await?;
    let run = |namespace: &'static str| {
        tokio::process::Command::new(lab.binary())
            .arg("run")
            .args(job_args(&cluster, &job, PARTITIONS, namespace, &data))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
    };
    finish(run("ref")?).await?;
    let reference = Effects::of(&c, "ref").await?;
    ensure(reference.duplicates == 0, || {
        format!("{} changes refused without a failure", reference.duplicates)
    })?;

    let faulty = run("t")?;
    let victim = cluster.executors[1].pid();
    trained_in_the_pass(&c, "t", victim).await?;
    match fault {
        Fault::Killed => cluster.executors[1].kill(),
        Fault::Frozen => signal(&cluster.executors[1], "STOP")?,
    }
    let fault = Instant::now();
    finish(faulty).await?;
    let recovery = fault.elapsed();
    let effects = Effects::of(&c, "t").await?;
    ensure(effects.duplicates > 0, || {
        "no change was refused: no task ran again".into()
    })?;
    Ok(Outcome {
        tally: effects.tally(&reference),
        recovery,
    })
}

/// The `angel-ps run` arguments of `job` on `cluster` with `partitions` target partitions, in
/// `namespace`, its `${data}` being `data`.
pub fn job_args(
    cluster: &LocalCluster,
    job: &Path,
    partitions: usize,
    namespace: &str,
    data: &Path,
) -> Vec<String> {
    [
        &job.display().to_string(),
        "--ballista",
        cluster.scheduler_url(),
        "--master",
        &cluster.master.addr,
        "--partitions",
        &partitions.to_string(),
        "--namespace",
        namespace,
        "--var",
        &format!("data={}", data.display()),
    ]
    .map(String::from)
    .to_vec()
}

/// Waits (at most [`LIMIT`]) for a run of `angel-ps run` to end, and fails unless it succeeded.
async fn finish(child: tokio::process::Child) -> Result<()> {
    let output = tokio::time::timeout(LIMIT, child.wait_with_output())
        .await
        .map_err(|_| format!("the job did not end within {LIMIT:?}"))??;
    ensure(output.status.success(), || {
        format!(
            "the job failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })
}

/// Waits until executor `victim` has trained in the counting pass of the job in `namespace`
/// (pushed to the model after the counter appeared: every push of the statement before was
/// recorded by then) and tasks of the pass have finished (3 counter flushes): killed then, its
/// finished tasks' output is lost with it and its running task stops halfway.
async fn trained_in_the_pass(c: &PsClient, namespace: &str, victim: u32) -> Result<()> {
    let deadline = Instant::now() + LIMIT;
    let mut before_the_pass = None;
    loop {
        ensure(Instant::now() < deadline, || {
            "the executor never trained in the counting pass".into()
        })?;
        let status = c.status().await?;
        let flushed = Effects::versions(&status, counter_space(&status, namespace)).max();
        let counting = flushed.is_some();
        let model = model_id(&status, namespace);
        let pushed: u64 = (angel_proto::pushes::totals(&status).iter())
            .filter(|p| Some(p.matrix_id) == model && worker_pid(p.worker_id) == u64::from(victim))
            .map(|p| p.pushes)
            .sum();
        match before_the_pass {
            None if counting => before_the_pass = Some(pushed),
            Some(before) if pushed > before && flushed >= Some(3) => return Ok(()),
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a run of [`JOB`] left on the PS.
#[derive(Debug)]
struct Effects {
    /// The counter's (key, count) pairs, by key.
    counts: Vec<(String, i64)>,
    /// The changes the model's partitions applied.
    applied: u64,
    /// The changes the servers refused as sent before (model and counter).
    duplicates: u64,
}

impl Effects {
    /// The effects of the run in `namespace`.
    async fn of(c: &PsClient, namespace: &str) -> Result<Effects> {
        let mut counts: Vec<(String, i64)> = (c.counter_indexed(&format!("{namespace}/seen")))
            .await?
            .into_iter()
            .map(|(key, count, _)| (key, count))
            .collect();
        counts.sort();
        let status = c.status().await?;
        let (model, counter) = (
            model_id(&status, namespace),
            counter_space(&status, namespace),
        );
        let partitions = || status.servers.iter().flat_map(|s| &s.partitions);
        let duplicates = partitions()
            .filter(|p| Some(p.matrix_id) == model || Some(p.matrix_id) == counter)
            .map(|p| p.duplicates)
            .sum();
        Ok(Effects {
            counts,
            applied: Effects::versions(&status, model).sum(),
            duplicates,
        })
    }

    /// The changes applied by each partition of matrix `id`.
    fn versions(status: &StatusReply, id: Option<u32>) -> impl Iterator<Item = u64> + '_ {
        (status.servers.iter().flat_map(|s| &s.partitions))
            .filter(move |p| Some(p.matrix_id) == id)
            .map(|p| p.version)
    }

    /// Keys counted and mini-batches applied fewer (lost) or more (doubled) times than in
    /// `reference`; a key missing from one side counts as lost or doubled.
    fn tally(&self, reference: &Effects) -> Tally {
        let mut tally = Tally::default();
        let expected: std::collections::HashMap<&str, i64> = (reference.counts.iter())
            .map(|(k, n)| (k.as_str(), *n))
            .collect();
        for (key, count) in &self.counts {
            let want = expected.get(key.as_str()).copied().unwrap_or(0);
            tally = tally + Tally::of(&[*count], want);
        }
        let found: std::collections::HashSet<&str> =
            self.counts.iter().map(|(k, _)| k.as_str()).collect();
        tally.lost += (expected.keys()).filter(|k| !found.contains(*k)).count() as u64;
        tally.lost += reference.applied.saturating_sub(self.applied);
        tally.doubled += self.applied.saturating_sub(reference.applied);
        tally
    }
}

/// The id of model `m` of `namespace`.
fn model_id(status: &StatusReply, namespace: &str) -> Option<u32> {
    let map = status.map.as_ref()?;
    let name = format!("{namespace}/m");
    map.matrices.iter().find(|m| m.name == name).map(|m| m.id)
}

/// The id of the key space of counter `seen` of `namespace`.
fn counter_space(status: &StatusReply, namespace: &str) -> Option<u32> {
    let map = status.map.as_ref()?;
    let name = format!("{namespace}/seen");
    let counter = map.counters.iter().find(|k| k.name == name)?;
    counter.space.as_ref().map(|s| s.id)
}
