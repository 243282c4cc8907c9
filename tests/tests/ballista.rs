//! Jobs on a Ballista cluster of real processes on 127.0.0.1: a PS master and 2 servers, an
//! `angel-ps scheduler` and 2 `angel-ps executor`s, and `angel-ps run --ballista` as the
//! client process.

use std::collections::HashMap;
use std::path::Path;
use std::process::Output;
use std::time::Instant;

use angel_client::{PsClient, worker_pid};
use angel_ps_cli::local_cluster::{LocalCluster, Process};
use angel_tests::{binary, printed_row, repo, run_job, stock_scheduler};

/// Runs `angel-ps run args...` to the end; returns its pid and output.
fn run(args: &[&str]) -> (u32, Output) {
    run_job(args, &[])
}

/// Runs the Adult job with `extra` flags; returns (pid, holdout AUC, stdout).
fn adult(out: &Path, extra: &[&str]) -> (u32, f64, String) {
    let job = repo("examples/adult/job.sql");
    let data = format!("data={}", repo("examples/data/adult").display());
    let out = format!("out={}", out.display());
    let mut args = vec![job.to_str().unwrap(), "--var", &data, "--var", &out];
    args.extend_from_slice(extra);
    let (pid, output) = run(&args);
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "angel-ps run {extra:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let auc = printed_row(&stdout, "holdout_logloss")[0];
    (pid, auc, stdout)
}

/// Pushes per (process id, matrix name), summed over servers, from the master's status.
fn pushes_by_pid(master: &str) -> HashMap<(u64, String), u64> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let status = runtime.block_on(async {
        let client = PsClient::connect(master).await.unwrap();
        client.status().await.unwrap()
    });
    let map = status.map.clone().unwrap_or_default();
    let names: HashMap<u32, String> = map
        .matrices
        .iter()
        .map(|m| (m.id, m.name.clone()))
        .collect();
    let mut out = HashMap::new();
    for p in &angel_proto::pushes::totals(&status) {
        let name = names.get(&p.matrix_id).cloned().unwrap_or_default();
        *out.entry((worker_pid(p.worker_id), name)).or_default() += p.pushes;
    }
    out
}

#[test]
fn adult_on_ballista_matches_embedded_and_trains_in_the_executors() {
    let out = tempfile::tempdir().unwrap();
    let (_, embedded_auc, _) = adult(&out.path().join("embedded"), &["--partitions", "4"]);

    let cluster = LocalCluster::start(&binary(), 2, 2, 2).expect("cluster starts");
    let (client_pid, cluster_auc, stdout) = adult(
        &out.path().join("cluster"),
        &[
            "--ballista",
            cluster.scheduler_url(),
            "--master",
            &cluster.master.addr,
        ],
    );
    assert!(
        (cluster_auc - embedded_auc).abs() <= 0.005,
        "AUC on Ballista {cluster_auc} vs embedded {embedded_auc}"
    );
    let difference = printed_row(&stdout, "max_difference")[0];
    assert!(
        difference < 1e-6,
        "saved and reloaded model differ by {difference}"
    );

    let pushes = pushes_by_pid(&cluster.master.addr);
    let trainers: Vec<u32> = cluster
        .executors
        .iter()
        .map(Process::pid)
        .filter(|pid| {
            pushes
                .get(&(u64::from(*pid), "adult".into()))
                .is_some_and(|&n| n > 0)
        })
        .collect();
    assert_eq!(
        trainers.len(),
        2,
        "executors that pushed to 'adult': {pushes:?}"
    );
    assert_eq!(
        pushes.get(&(u64::from(client_pid), "adult".to_string())),
        None,
        "the client process pushed to the trained model: {pushes:?}"
    );
}

/// Runs a one-statement job that needs the PS; returns (stderr, seconds taken).
fn failing_job(dir: &Path, extra: &[&str]) -> (String, f64) {
    let job = dir.join("count.sql");
    std::fs::write(
        &job,
        "SELECT ps_counter_add('c', make_array(x)) AS n FROM (VALUES ('a'), ('b')) AS t(x);",
    )
    .unwrap();
    let mut args = vec![job.to_str().unwrap()];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let (_, output) = run(&args);
    assert!(!output.status.success(), "the job should fail");
    (
        String::from_utf8_lossy(&output.stderr).to_string(),
        started.elapsed().as_secs_f64(),
    )
}

#[test]
fn a_scheduler_without_our_functions_or_a_dead_master_fails_fast_and_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let ps = LocalCluster::start(&binary(), 1, 0, 1).expect("PS starts");
    let stock = Process::spawn(&stock_scheduler(), &[]).expect("stock scheduler starts");
    let (err, took) = failing_job(
        dir.path(),
        &["--ballista", &stock.addr, "--master", &ps.master.addr],
    );
    assert!(
        err.contains("scheduler")
            && err.contains("ps_counter_add")
            && err.contains("angel-ps scheduler"),
        "{err}"
    );
    assert!(took < 30.0, "took {took:.1}s");

    let dead = format!(
        "127.0.0.1:{}",
        angel_ps_cli::local_cluster::free_port().unwrap()
    );
    let (err, took) = failing_job(
        dir.path(),
        &["--ballista", ps.scheduler_url(), "--master", &dead],
    );
    assert!(err.contains(&format!("PS master at {dead}")), "{err}");
    assert!(took < 30.0, "took {took:.1}s");
}

#[test]
fn a_job_finishes_on_the_executors_left_when_one_dies() {
    let out = tempfile::tempdir().unwrap();
    let mut cluster = LocalCluster::start(&binary(), 2, 2, 2).expect("cluster starts");
    cluster.executors[1].kill();
    let (_, auc, _) = adult(
        out.path(),
        &[
            "--ballista",
            cluster.scheduler_url(),
            "--master",
            &cluster.master.addr,
        ],
    );
    assert!(auc >= 0.905, "Adult AUC {auc} on the surviving executor");
    let pushes = pushes_by_pid(&cluster.master.addr);
    let survivor = u64::from(cluster.executors[0].pid());
    assert!(
        pushes
            .get(&(survivor, "adult".into()))
            .is_some_and(|&n| n > 0),
        "the surviving executor trained: {pushes:?}"
    );
}
