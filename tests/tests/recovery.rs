//! Recovery on real processes: a server killed with SIGKILL is declared dead (on a client's
//! report, or when its heartbeats stop) and its partitions, of matrices and of counters, are
//! restored on the live server from their snapshots, with the changes since replayed; calls
//! in flight continue, model rotation's, a topic model's and a boosted model's too. A master
//! killed and restarted resumes from its saved state.

use std::time::{Duration, Instant};

use angel_client::{MatrixSpec, PsClient, ValueType};
use angel_local_cluster::free_port;
use angel_proto::{Caller, PushRequest, RowSlice, wire};
use angel_ps_service::{Standalone, StandaloneConfig};
use angel_tests::{
    Cluster, Job, finished, raw_server, repo, result_value, spawn, start_job, summary,
};

/// A master snapshotting to a fresh folder every `interval` seconds, and two servers that
/// heartbeat every 200 ms.
fn cluster(dir: &std::path::Path, interval: &str, timeout: &str) -> Cluster {
    let root = dir.display().to_string();
    let master = [
        "--snapshot-dir",
        &root,
        "--snapshot-interval-secs",
        interval,
        "--server-timeout-secs",
        timeout,
    ];
    Cluster::start_flags(2, &master, &["--heartbeat-ms", "200"])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_is_replaced_on_the_first_call_that_misses_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster(dir.path(), "3600", "3600");
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("w", 1, 1000))
        .await
        .unwrap();
    let keys: Vec<u64> = (0..1000).step_by(7).collect();
    let ones = vec![1.0f32; keys.len()];
    c.push_keys("w", 0, &keys, &ones).await.unwrap();
    c.create_counter("f").await.unwrap();
    let words = ["a", "b", "c", "d", "e", "f", "g", "h"];
    c.counter_increase("f", &words, &[2; 8]).await.unwrap();
    assert!(c.snapshot().await.unwrap().partitions > 0);

    let dead = cluster.servers[1].addr.clone();
    cluster.servers[1].kill();
    let started = Instant::now();
    let values = c.pull_keys::<f32>("w", 0, &keys).await.unwrap();
    let took = started.elapsed();
    assert_eq!(values, ones, "every value, from the snapshots");
    c.push_keys("w", 0, &keys, &ones).await.unwrap();
    let values = c.pull_keys::<f32>("w", 0, &keys).await.unwrap();
    assert!(
        values.iter().all(|&v| v == 2.0),
        "pushes reach the new owners"
    );
    let sealed = c.counter_seal("f", 2).await.unwrap();
    assert_eq!(sealed.meta.size, 8, "the counter's keys survived");

    let status = c.status().await.unwrap();
    let recovery = status.recoveries.iter().find(|r| r.addr == dead).unwrap();
    assert!(
        recovery.error.is_empty() && recovery.restored > 0,
        "{recovery:?}"
    );
    assert!(recovery.cause.contains("probe"), "{recovery:?}");
    assert_eq!(status.servers.len(), 1);
    let shown = angel_runner::status::render(&status);
    assert!(
        shown.contains("recoveries") && shown.contains(&dead),
        "{shown}"
    );
    eprintln!("the pull that found the dead server returned after {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_whose_heartbeats_stop_is_replaced_without_any_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster(dir.path(), "0.2", "1");
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::dense("d", 1, 64))
        .await
        .unwrap();
    c.push_row("d", 0, &[0.5f32; 64]).await.unwrap();
    // The periodic snapshot holds the push once every partition is durable.
    let durable = |status: &angel_proto::StatusReply| {
        status
            .servers
            .iter()
            .flat_map(|s| &s.partitions)
            .all(|p| p.durable == p.version && p.version > 0)
    };
    wait_for(&c, durable, Duration::from_secs(20)).await;
    cluster.servers[0].kill();
    let replaced = |status: &angel_proto::StatusReply| {
        status.recoveries.len() == 1 && status.recoveries[0].cause.contains("no heartbeat")
    };
    wait_for(&c, replaced, Duration::from_secs(20)).await;
    let row = c.pull_rows::<f32>("d", &[0]).await.unwrap();
    assert_eq!(row[0], vec![0.5f32; 64]);
}

#[tokio::test(flavor = "multi_thread")]
async fn changes_after_the_last_snapshot_are_replayed_and_none_applies_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster(dir.path(), "3600", "3600");
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("w", 1, 1000))
        .await
        .unwrap();
    c.create_counter("f").await.unwrap();
    // A fixed sequence of 40 pushes and counts; a snapshot after the first 20 only.
    let mut expected = vec![0.0f32; 1000];
    let mut counts = std::collections::HashMap::new();
    for i in 0..40u64 {
        let keys: Vec<u64> = (0..25).map(|j| (i * 37 + j * 41) % 1000).collect();
        let values: Vec<f32> = keys.iter().map(|&k| 0.5 * (1 + k % 3) as f32).collect();
        for (k, v) in keys.iter().zip(&values) {
            expected[*k as usize] += v;
        }
        c.push_keys("w", 0, &keys, &values).await.unwrap();
        let words: Vec<String> = keys.iter().map(|k| format!("k{}", k % 50)).collect();
        for w in &words {
            *counts.entry(w.clone()).or_insert(0i64) += 1;
        }
        c.counter_increase("f", &words, &vec![1; words.len()])
            .await
            .unwrap();
        if i == 19 {
            c.snapshot().await.unwrap();
        }
    }
    cluster.servers[1].kill();
    let all: Vec<u64> = (0..1000).collect();
    let values = c.pull_keys::<f32>("w", 0, &all).await.unwrap();
    assert_eq!(
        values, expected,
        "every push once: nothing lost, nothing twice"
    );
    let (replayed, lost) = c.replay_counts();
    assert!(
        replayed > 0 && lost == 0,
        "replayed {replayed}, lost {lost}"
    );
    c.counter_seal("f", 1).await.unwrap();
    let words: Vec<&String> = counts.keys().collect();
    let got = c.counter_get("f", &words).await.unwrap();
    for (w, (count, _)) in words.iter().zip(got) {
        assert_eq!(count, counts[*w], "count of {w}");
    }
    let status = c.status().await.unwrap();
    let stats: Vec<_> = status.servers.iter().flat_map(|s| &s.partitions).collect();
    assert!(stats.iter().any(|p| p.replayed > 0), "{stats:?}");
    let reported = &status.recoveries[0];
    assert_eq!(
        (reported.changes_replayed, reported.changes_lost),
        (replayed, lost),
        "the status shows what the client replayed and lost"
    );
}

/// Read-your-writes across a recovery: once the call that missed a killed server installs the
/// new partition map, and while it replays the client's changes to the restored partitions,
/// the client's other calls wait for the replay, so no pull answers a restored partition
/// without them. (Before the client held its routing during replays, pulls that started as
/// soon as the map moved read the bare snapshot.)
#[tokio::test(flavor = "multi_thread")]
async fn pulls_during_a_replay_see_every_change_their_client_made() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster(dir.path(), "3600", "3600");
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("w", 1, 1000))
        .await
        .unwrap();
    c.snapshot().await.unwrap();
    let keys: Vec<u64> = (0..1000).collect();
    let pushes = 200;
    for _ in 0..pushes {
        c.push_keys("w", 0, &keys, &vec![1.0f32; keys.len()])
            .await
            .unwrap();
    }
    cluster.servers[1].kill();
    let before = c.map_epoch();
    // Pullers that start the moment the map moves, while the replay is under way.
    let pullers: Vec<_> = (0..4)
        .map(|_| {
            let (c, keys) = (c.clone(), keys.clone());
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(60);
                while c.map_epoch() == before && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                c.pull_keys::<f32>("w", 0, &keys).await.unwrap()
            })
        })
        .collect();
    let first = c.pull_keys::<f32>("w", 0, &keys).await.unwrap();
    for values in std::iter::once(first).chain(futures_of(pullers).await) {
        let wrong = values.iter().filter(|&&v| v != pushes as f32).count();
        assert_eq!(wrong, 0, "values a pull answered without every push");
    }
    let (replayed, lost) = c.replay_counts();
    assert!(
        replayed > 0 && lost == 0,
        "replayed {replayed}, lost {lost}"
    );
}

/// The answers of `tasks`, in order.
async fn futures_of<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// The address and flags of a master with snapshots under `root` on a fixed free port, so it
/// can be killed and started again as the same master.
fn restartable_master(root: &std::path::Path) -> (String, Vec<String>) {
    let bind = format!("127.0.0.1:{}", free_port().unwrap());
    let args = [
        "master",
        "--bind",
        &bind,
        "--snapshot-dir",
        root.to_str().unwrap(),
        "--snapshot-interval-secs",
        "3600",
        "--server-timeout-secs",
        "30",
    ];
    (bind.clone(), args.map(String::from).to_vec())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_master_resumes_and_its_servers_rejoin_with_their_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let (bind, master_args) = restartable_master(dir.path());
    let master_args: Vec<&str> = master_args.iter().map(String::as_str).collect();
    let mut master = spawn(&master_args);
    let server = ["server", "--master", &bind, "--heartbeat-ms", "200"];
    let _servers = [spawn(&server), spawn(&server)];
    let c = PsClient::connect(&bind).await.unwrap();
    c.create_matrix(MatrixSpec::sparse("w", 1, 1000))
        .await
        .unwrap();
    let keys: Vec<u64> = (0..1000).step_by(3).collect();
    let ones = vec![1.0f32; keys.len()];
    c.push_keys("w", 0, &keys, &ones).await.unwrap();
    c.create_counter("f").await.unwrap();
    c.counter_increase("f", &["a", "b", "c"], &[1, 1, 1])
        .await
        .unwrap();

    master.kill();
    // Data goes on without the master: the servers hold the partitions.
    c.push_keys("w", 0, &keys, &ones).await.unwrap();
    let _master = spawn(&master_args);
    // Calls to the master wait for it, then for its servers to register again.
    let sealed = c.counter_seal("f", 1).await.unwrap();
    assert_eq!(sealed.meta.size, 3, "the counter survived the restart");
    c.create_matrix(MatrixSpec::dense("d", 1, 8)).await.unwrap();
    let values = c.pull_keys::<f32>("w", 0, &keys).await.unwrap();
    assert!(values.iter().all(|&v| v == 2.0), "partitions kept in place");
    let status = c.status().await.unwrap();
    assert_eq!(status.servers.len(), 2, "both servers rejoined: {status:?}");
    assert!(status.recoveries.is_empty(), "{:?}", status.recoveries);
    let map = status.map.unwrap();
    let names: Vec<&str> = map.matrices.iter().map(|m| m.name.as_str()).collect();
    assert!(names.contains(&"w") && names.contains(&"d"), "{names:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standby_takes_no_new_partitions_and_takes_a_dead_servers_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster(dir.path(), "3600", "3600");
    let master = cluster.master.addr.clone();
    let standby = spawn(&["server", "--master", &master, "--standby"]);
    let c = cluster.client().await;
    let m = c
        .create_matrix(MatrixSpec::sparse("w", 1, 1000))
        .await
        .unwrap();
    let status = c.status().await.unwrap();
    let id_of = |addr: &str| {
        let server = status.servers.iter().find(|s| s.addr == addr).unwrap();
        server.server_id
    };
    let (spare, doomed) = (id_of(&standby.addr), id_of(&cluster.servers[1].addr));
    assert!(m.meta.partitions.iter().all(|p| p.server_id != spare));
    let moving: Vec<u32> = m
        .meta
        .partitions
        .iter()
        .filter(|p| p.server_id == doomed)
        .map(|p| p.id)
        .collect();
    assert!(!moving.is_empty());
    let keys: Vec<u64> = (0..1000).step_by(11).collect();
    let ones = vec![1.0f32; keys.len()];
    c.push_keys("w", 0, &keys, &ones).await.unwrap();
    cluster.servers[1].kill();
    assert_eq!(c.pull_keys::<f32>("w", 0, &keys).await.unwrap(), ones);
    let moved = c.matrix("w").await.unwrap();
    for pid in moving {
        assert_eq!(
            moved.meta.partitions[pid as usize].server_id, spare,
            "partition {pid}"
        );
    }
    let status = c.status().await.unwrap();
    let now = status
        .servers
        .iter()
        .find(|s| s.server_id == spare)
        .unwrap();
    assert!(!now.standby, "it serves like the others now");
}

/// How far apart two holdout AUCs of the CTR job below may be and still count as the same:
/// its two training tasks run asynchronously (ASP) and interleave differently at every run, so
/// even without a fault the AUC measured 0.8236-0.8273 over six runs, so the bound is well
/// above that spread. What tells a lost change is the job's own summary, which must say that
/// none was lost.
const SAME_AUC: f64 = 0.01;

/// Starts the CTR job (3 epochs) on `data` against the service at `master`.
fn ctr_job(master: &str, data: &std::path::Path) -> Job {
    start_job(&strs(&ctr_args(master, data, "ctr", 3)), &[])
}

/// The CTR example's arguments for `epochs` epochs in `namespace` against the service at
/// `master`.
fn ctr_args(master: &str, data: &std::path::Path, namespace: &str, epochs: u32) -> Vec<String> {
    let job = repo("examples/ctr/job.sql");
    let args = [
        job.to_str().unwrap(),
        "--master",
        master,
        "--namespace",
        namespace,
        "--var",
        &format!("epochs={epochs}"),
        "--var",
        &format!("data={}", data.display()),
    ];
    args.map(String::from).to_vec()
}

/// `args` as the `&str`s a job takes.
fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The epochs of the job's epoch table, in order.
fn epochs_of(stdout: &str) -> Vec<u64> {
    let lines = angel_tests::json_lines(stdout);
    (lines.iter())
        .filter(|l| l["kind"] == "epoch")
        .filter_map(|l| l["epoch"].as_u64())
        .collect()
}

/// Waits until model `model` (namespaced) has completed `epochs` epochs, as its job reported.
async fn wait_for_epochs(c: &PsClient, model: &str, epochs: u32) {
    let request = angel_proto::StatusRequest {
        epochs: true,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let status = c.status_with(request).await.unwrap();
        let done = (status.epochs.iter())
            .filter(|e| e.model == model)
            .map(|e| e.epoch)
            .max();
        if done >= Some(epochs) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{model} never completed {epochs} epochs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A killed job resumes (Angel's worker recovery). The CTR job runs on a service for 12 epochs
/// and is killed (SIGKILL) once its model has completed 2. Run again at once in the same
/// namespace, it waits for the killed run's hold to lapse, redoes its tables and its counter,
/// trains only the epochs after the last one completed, on the model the servers hold, and
/// ends with the AUC of a run never killed; run once more, it runs whole. Before, a killed job
/// started over from zero. And one run at a time: a run of a job whose run lives (a long one
/// in another namespace) waits for it, then fails naming the job.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_job_run_again_resumes_after_its_last_completed_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ctr.csv");
    angel_datagen::ctr_data::generate(&data, 100_000, 7).unwrap();
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    let master = &cluster.master.addr;
    let all: Vec<u64> = (1..=12).collect();
    let whole = finished(start_job(&strs(&ctr_args(master, &data, "whole", 12)), &[]));
    assert_eq!(epochs_of(&whole), all);
    let expected = holdout_auc(&whole);

    let first = start_job(&strs(&ctr_args(master, &data, "resumed", 12)), &[]);
    wait_for_epochs(&c, "resumed/ctr", 2).await;
    first.kill();
    let resumed = finished(start_job(
        &strs(&ctr_args(master, &data, "resumed", 12)),
        &[],
    ));
    let epochs = epochs_of(&resumed);
    assert!(
        // Killed between an epoch's report and its record, the run redoes that epoch.
        epochs.first() >= Some(&2) && epochs.last() == Some(&12),
        "the resumed run trained epochs {epochs:?}"
    );
    let auc = holdout_auc(&resumed);
    assert!(
        (auc - expected).abs() < SAME_AUC,
        "AUC {auc} resumed, {expected} never killed"
    );
    let from = epochs.first();
    eprintln!("resumed at epoch {from:?}: holdout AUC {auc:.4}, {expected:.4} never killed");
    let again = finished(start_job(
        &strs(&ctr_args(master, &data, "resumed", 12)),
        &[],
    ));
    assert_eq!(
        epochs_of(&again),
        all,
        "the job ended: run again, it runs whole"
    );

    let long = ctr_args(master, &data, "held", 10_000);
    let mut holder = start_job(&strs(&long), &[]);
    wait_for_epochs(&c, "held/ctr", 1).await;
    let (_, second) = angel_tests::run_job(&strs(&long), &[]);
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(holder.running(), "the first run lived through the second");
    assert!(
        !second.status.success(),
        "a second run while the first lives"
    );
    assert!(said.contains("is running already"), "{said}");
    holder.kill();
}

/// The holdout AUC of the job's evaluation (a result; the epoch rows are not results).
fn holdout_auc(stdout: &str) -> f64 {
    result_value(stdout, "holdout_auc")
}

/// Model `name` (namespaced) has taken more than `changes` changes: its job is training.
fn has_taken(name: &'static str, changes: u64) -> impl Fn(&angel_proto::StatusReply) -> bool {
    move |status| {
        let map = status.map.clone().unwrap_or_default();
        let Some(model) = map.matrices.iter().find(|m| m.name == name) else {
            return false;
        };
        let stats = status.servers.iter().flat_map(|s| &s.partitions);
        let pushes: u64 = stats
            .filter(|p| p.matrix_id == model.id)
            .map(|p| p.version)
            .sum();
        pushes > changes
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ctr_job_finishes_with_the_same_auc_when_a_server_or_the_master_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ctr.csv");
    angel_datagen::ctr_data::generate(&data, 100_000, 7).unwrap();

    let reference = Cluster::start(2);
    let stdout = finished(ctr_job(&reference.master.addr, &data));
    let expected = holdout_auc(&stdout);

    let snapshots = dir.path().join("snapshots");
    let mut cluster = cluster(&snapshots, "3600", "3600");
    let job = ctr_job(&cluster.master.addr, &data);
    let c = cluster.client().await;
    wait_for(&c, has_taken("ctr/ctr", 50), Duration::from_secs(300)).await;
    cluster.servers[1].kill();
    let stdout = finished(job);
    let auc = holdout_auc(&stdout);
    assert!(
        (auc - expected).abs() < SAME_AUC,
        "AUC {auc} with a server killed, {expected} without"
    );
    let said = summary(&stdout);
    let (replayed, lost) = (said["replayed"].as_u64(), said["lost"].as_u64());
    assert!(replayed > Some(0) && lost == Some(0), "{said}");
    eprintln!("holdout AUC {auc:.4} with a server killed mid-job, {expected:.4} without");
    eprintln!("{replayed:?} changes replayed to the restored partitions, {lost:?} lost");
    let status = c.status().await.unwrap();
    assert_eq!(status.recoveries.len(), 1, "{:?}", status.recoveries);
    assert!(
        status.recoveries[0].error.is_empty(),
        "{:?}",
        status.recoveries
    );

    // The master killed mid-training and started again on its address and directory.
    let (bind, master_args) = restartable_master(&dir.path().join("master"));
    let master_args: Vec<&str> = master_args.iter().map(String::as_str).collect();
    let mut master = spawn(&master_args);
    let server = ["server", "--master", &bind, "--heartbeat-ms", "200"];
    let _servers = [spawn(&server), spawn(&server)];
    let job = ctr_job(&bind, &data);
    let c = PsClient::connect(&bind).await.unwrap();
    wait_for(&c, has_taken("ctr/ctr", 50), Duration::from_secs(300)).await;
    master.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _master = spawn(&master_args);
    let auc = holdout_auc(&finished(job));
    assert!(
        (auc - expected).abs() < SAME_AUC,
        "AUC {auc} with the master killed and restarted, {expected} without"
    );
    eprintln!("holdout AUC {auc:.4} with the master restarted mid-job");
}

/// Starts the ratings example (rotation without time control, so every epoch trains every
/// rating) on the files in `dir` against the service at `master`.
fn mf_job(master: &str, dir: &std::path::Path) -> Job {
    let job = repo("examples/mf/job.sql");
    let var = |name: &str, file: &str| format!("{name}={}", dir.join(file).display());
    let (train, test, out) = (
        var("train", "train.csv"),
        var("test", "test.csv"),
        var("out", &format!("recs-{}", free_port().unwrap())),
    );
    let args = [
        job.to_str().unwrap(),
        "--master",
        master,
        "--namespace",
        "mf",
        "--var",
        "epochs=30",
        "--var",
        "step_ms=0",
        "--var",
        "rank=4",
    ];
    let files = ["--var", &train, "--var", &test, "--var", &out];
    start_job(&[&args[..], &files].concat(), &[])
}

/// Two runs of the ratings example differ by up to this much in holdout RMSE (0.002 here):
/// its joins hand each worker its ratings in an order that changes from run to run, and SGD's
/// result follows the order.
const SAME_RMSE: f64 = 0.005;

/// Model rotation survives a killed server as the linear models do: its slices' changes since
/// the last snapshot are replayed to the restored partitions, none is lost, and the job ends
/// with the holdout RMSE of a run without the kill. It survives the master killed mid-round and
/// started again on its address and directory too: the master resumes the round from its saved
/// state (before, every later call failed "has no round running; join first").
#[tokio::test(flavor = "multi_thread")]
async fn a_rotation_job_ends_with_the_same_model_when_a_server_or_the_master_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let spec = angel_datagen::ratings_data::RatingsSpec::small();
    let (train, test) = (dir.path().join("train.csv"), dir.path().join("test.csv"));
    angel_datagen::ratings_data::generate(&train, &test, &spec, 5).unwrap();

    let reference = Cluster::start(2);
    let expected = result_value(
        &finished(mf_job(&reference.master.addr, dir.path())),
        "holdout_rmse",
    );

    let mut cluster = cluster(&dir.path().join("snapshots"), "3600", "3600");
    let job = mf_job(&cluster.master.addr, dir.path());
    let c = cluster.client().await;
    wait_for(&c, has_taken("mf/recs", 100), Duration::from_secs(300)).await;
    cluster.servers[1].kill();
    let stdout = finished(job);
    let rmse = result_value(&stdout, "holdout_rmse");
    assert!(
        (rmse - expected).abs() < SAME_RMSE,
        "holdout RMSE {rmse} with a server killed, {expected} without"
    );
    let said = summary(&stdout);
    let (replayed, lost) = (said["replayed"].as_u64(), said["lost"].as_u64());
    assert!(replayed > Some(0) && lost == Some(0), "{said}");
    eprintln!("holdout RMSE {rmse:.6} with a server killed mid-rotation, {expected:.6} without");

    let (bind, master_args) = restartable_master(&dir.path().join("master"));
    let master_args: Vec<&str> = master_args.iter().map(String::as_str).collect();
    let mut master = spawn(&master_args);
    let server = ["server", "--master", &bind, "--heartbeat-ms", "200"];
    let _servers = [spawn(&server), spawn(&server)];
    let job = mf_job(&bind, dir.path());
    let c = PsClient::connect(&bind).await.unwrap();
    wait_for(&c, has_taken("mf/recs", 100), Duration::from_secs(300)).await;
    master.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _master = spawn(&master_args);
    let stdout = finished(job);
    let rmse = result_value(&stdout, "holdout_rmse");
    assert!(
        (rmse - expected).abs() < SAME_RMSE,
        "holdout RMSE {rmse} with the master killed and restarted, {expected} without"
    );
    // The restarted master's record: the round it resumed and every later one, each step of
    // each rank handed back exactly once.
    let request = angel_proto::StatusRequest {
        leases: true,
        ..Default::default()
    };
    let leases = c.status_with(request).await.unwrap().leases;
    let mut steps = std::collections::HashMap::new();
    for l in &leases {
        assert!(l.end_us > 0, "a lease never handed back: {l:?}");
        *steps.entry((l.round, l.group, l.rank, l.step)).or_insert(0) += 1;
    }
    let twice: Vec<_> = steps.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "steps leased twice: {twice:?}");
    let rounds: std::collections::BTreeSet<u32> = leases.iter().map(|l| l.round).collect();
    eprintln!("holdout RMSE {rmse:.6} with the master restarted; it recorded rounds {rounds:?}");
}

/// A topic model survives a killed server: the topics example (rotation, 60 sweeps) on a
/// cluster loses a server mid-training, the job ends saying no change was lost, and in the
/// saved model each word's counts over the topics add up to its tokens in the documents
/// exactly (a change lost or applied twice would move them).
#[tokio::test(flavor = "multi_thread")]
async fn a_topic_model_keeps_every_token_when_a_server_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster(&dir.path().join("snapshots"), "3600", "3600");
    let out = format!("out={}", dir.path().display());
    let data = format!("data={}", repo("examples/data/lda").display());
    let job = repo("examples/lda/job.sql");
    let args = [job.to_str().unwrap(), "--master", &cluster.master.addr];
    let flags = ["--namespace", "lda", "--var", "epochs=60", "--var", &out];
    let flags = [&flags[..], &["--var", &data]].concat();
    let job = start_job(&[&args[..], &flags].concat(), &[]);
    kill_a_server_during(job, &mut cluster, has_taken("lda/topics", 150)).await;

    let check = dir.path().join("check.sql");
    std::fs::write(
        &check,
        "CREATE TABLE tokens AS SELECT word, count(*) AS n FROM (SELECT unnest(ps_tokens(text, \
         'min_length=3, stop_words=english')) AS word FROM read_csv('${data}/documents.csv')) \
         GROUP BY word HAVING count(*) >= 2;
         CREATE TABLE saved AS SELECT feature AS word, sum(count) AS n \
         FROM read_model('${out}/topics_model') GROUP BY feature;
         SELECT (SELECT sum(n) FROM tokens) AS tokens, count(*) AS differing_words \
         FROM tokens FULL OUTER JOIN saved ON tokens.word = saved.word \
         WHERE tokens.n IS DISTINCT FROM saved.n",
    )
    .unwrap();
    let checked = finished(start_job(
        &[check.to_str().unwrap(), "--var", &data, "--var", &out],
        &[],
    ));
    let (tokens, differing) = (
        result_value(&checked, "tokens"),
        result_value(&checked, "differing_words"),
    );
    assert!(tokens > 200.0, "{tokens} tokens");
    assert_eq!(
        differing, 0.0,
        "words whose saved counts are not their tokens"
    );
}

/// A boosted model survives a killed server: the trees example (15 trees) on a cluster loses
/// a server mid-training, the job ends saying no change was lost, and the saved trees are the
/// trees an undisturbed embedded run of the same job grows, node for node, to the bit (two
/// workers' histograms add up the same in either order, and a replay adds what the snapshot
/// lacks).
#[tokio::test(flavor = "multi_thread")]
async fn a_boosted_model_grows_the_same_trees_when_a_server_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster(&dir.path().join("snapshots"), "3600", "3600");
    let data = format!("data={}", repo("examples/data/adult").display());
    let job = repo("examples/gbdt/job.sql");
    let run = |out: &str| {
        let out = format!("out={}", dir.path().join(out).display());
        let vars = ["trees=15", "depth=4", "learning_rate=0.3", &data, &out];
        let flags: Vec<String> = vars
            .iter()
            .flat_map(|v| ["--var".into(), v.to_string()])
            .collect();
        [
            vec![job.display().to_string(), "--partitions".into(), "2".into()],
            flags,
        ]
        .concat()
    };
    let reference = run("reference");
    let reference: Vec<&str> = reference.iter().map(String::as_str).collect();
    finished(start_job(&reference, &[]));

    let killed = run("killed");
    let master = ["--master", &cluster.master.addr, "--namespace", "gbdt"];
    let killed: Vec<&str> = killed.iter().map(String::as_str).chain(master).collect();
    // After about 4 of the 15 trees (a tree of depth 4 pushes its row up to 5 times).
    let job = start_job(&killed, &[]);
    kill_a_server_during(job, &mut cluster, has_taken("gbdt/income", 20)).await;

    let check = dir.path().join("check.sql");
    std::fs::write(
        &check,
        "CREATE TABLE a AS SELECT * FROM read_model('${out}/reference/gbdt_model');
         CREATE TABLE b AS SELECT * FROM read_model('${out}/killed/gbdt_model');
         SELECT (SELECT count(*) FROM a) AS nodes,
           (SELECT count(*) FROM (SELECT * FROM a EXCEPT SELECT * FROM b)) +
           (SELECT count(*) FROM (SELECT * FROM b EXCEPT SELECT * FROM a)) AS differing",
    )
    .unwrap();
    let out = format!("out={}", dir.path().display());
    let checked = finished(start_job(&[check.to_str().unwrap(), "--var", &out], &[]));
    let (nodes, differing) = (
        result_value(&checked, "nodes"),
        result_value(&checked, "differing"),
    );
    assert!(nodes > 15.0 * 7.0, "{nodes} nodes");
    assert_eq!(differing, 0.0, "nodes of the trees that differ");
}

/// Kills the cluster's second server once `when` holds (within 5 minutes) while `job` runs, and
/// checks the job ends saying it replayed changes and lost none.
async fn kill_a_server_during(
    job: Job,
    cluster: &mut Cluster,
    when: impl Fn(&angel_proto::StatusReply) -> bool,
) {
    let c = cluster.client().await;
    wait_for(&c, when, Duration::from_secs(300)).await;
    cluster.servers[1].kill();
    let said = summary(&finished(job));
    let (replayed, lost) = (said["replayed"].as_u64(), said["lost"].as_u64());
    assert!(replayed > Some(0) && lost == Some(0), "{said}");
}

/// Polls the status until `done` holds, for at most `limit`.
async fn wait_for(c: &PsClient, done: impl Fn(&angel_proto::StatusReply) -> bool, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let status = c.status().await.unwrap();
        if done(&status) {
            return;
        }
        assert!(Instant::now() < deadline, "not reached: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_sent_twice_with_the_same_writer_and_seq_applies_once() {
    let cluster = Cluster::start(1);
    let c = cluster.client().await;
    let m = c
        .create_matrix(MatrixSpec::sparse("w", 1, 100))
        .await
        .unwrap();
    let key = m.meta.partitions[0].col_start;
    let push = |task: u64, seq: u64| PushRequest {
        caller: Some(Caller {
            worker_id: 7,
            task,
            seq,
            map_epoch: c.map_epoch(),
            ..Caller::default()
        }),
        matrix_id: m.meta.id,
        value_type: ValueType::F32 as i32,
        slices: vec![RowSlice {
            partition_id: m.meta.partitions[0].id,
            row: 0,
            keys: wire::encode_keys(&[key]),
            values: wire::encode_values(&[1.0f32]),
            codec: 0,
        }],
        gradients: false,
        bases: Vec::new(),
    };
    let mut server = raw_server(&cluster.servers[0].addr).await;
    // (writer 7, seq 1) twice; a task's (writer, seq) is its own, even with the same seq.
    for request in [push(0, 1), push(0, 1), push(0, 2), push(99, 1), push(99, 1)] {
        server.push(request).await.unwrap();
    }
    let value = c.pull_keys::<f32>("w", 0, &[key]).await.unwrap();
    assert_eq!(
        value,
        vec![3.0],
        "seq 1 and 2 of writer 7 and seq 1 of task 99, once each"
    );
    let status = c.status().await.unwrap();
    let duplicates: u64 = status
        .servers
        .iter()
        .flat_map(|s| &s.partitions)
        .map(|p| p.duplicates)
        .sum();
    assert_eq!(duplicates, 2);
}

/// A client that knew one service follows a fresh one started at the same address (a master
/// started without its state, or the next embedded service of a process): the new service's
/// map replaces its cache although its epochs start lower, so what the new service creates is
/// found and counted into. Before maps carried the service's identity the client ignored them
/// as older than its cache, and "no counter named" failed the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_follows_a_fresh_service_started_at_its_old_address() {
    let first = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let addr = first.master_addr();
    let client = PsClient::connect(&addr).await.unwrap();
    for i in 0..20 {
        client.create_counter(&format!("old{i}")).await.unwrap();
    }
    first.shutdown().await.unwrap();

    let second = StandaloneConfig {
        bind: addr.parse().unwrap(),
        ..StandaloneConfig::new(1)
    };
    let second = Standalone::start(second).await.unwrap();
    client.create_counter("new").await.unwrap();
    client
        .counter_increase("new", &["a", "b", "a"], &[1, 1, 1])
        .await
        .unwrap();
    client.counter_seal("new", 2).await.unwrap();
    let indexed = client.counter_get("new", &["a", "b"]).await.unwrap();
    assert_eq!(indexed, vec![(2, Some(0)), (1, None)]);
    let gone = client.counter("old0").await.unwrap_err();
    assert!(gone.to_string().contains("no counter named"), "{gone}");
    second.shutdown().await.unwrap();
}

/// A master started without its state while its server holds data refuses changes; a new
/// model asking which optimizers the servers run hears that, and why, rather than that no
/// optimizer of its name exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_model_hears_that_the_master_refuses_changes() {
    let mut cluster = Cluster::start_flags(1, &[], &["--heartbeat-ms", "200"]);
    let addr = cluster.master.addr.clone();
    let client = cluster.client().await;
    (client.create_matrix(MatrixSpec::dense("held", 1, 8)).await).unwrap();
    cluster.master.kill();
    let _fresh = spawn(&["master", "--bind", &addr]);
    let fresh = PsClient::connect(&addr).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fresh.status().await.unwrap().doubt.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the server never reported its data"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let err = fresh.optimizer("adam").await.unwrap_err().to_string();
    assert!(
        err.contains("optimizer 'adam'") && err.contains("the master refuses changes"),
        "{err}"
    );
}
