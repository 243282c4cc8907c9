//! SSP's bound, checked from the servers' record of pulls, and slow-worker flags, with one
//! worker slowed down by the `ANGEL_SLOW_WORKER` hook. The hook is read from the process's
//! environment, so this binary holds this one test.

mod common;

use angel_client::PsClient;
use angel_proto::pulls::lead;
use angel_proto::{ClockedPull, StatusRequest};
use common::{a9a_job, column, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssp_bounds_how_far_ahead_workers_pull_and_a_slow_worker_is_flagged() {
    let (service, job) = a9a_job().await;
    // SAFETY: this binary's only test, before any task of it runs.
    unsafe { std::env::set_var(angel_training::sync::worker::SLOW_WORKER_VAR, "1:4") };
    let options = "kind = 'logistic', dim = 123, batch_size = 32, epochs = 1, sync = 'ssp', \
                   staleness = 1, workers = 3";
    let sql = format!("CREATE MODEL ssp OPTIONS ({options}) AS SELECT * FROM train");
    let table = job.execute(&sql).await.unwrap();
    let (epochs, slow) = (&table[0], text(&table[0], "slow_workers"));
    assert_eq!(column(epochs, "workers"), [3.0]);
    assert!(slow[0].starts_with("rank 1 "), "slow workers: {slow:?}");

    let client = PsClient::connect(&service.master_addr()).await.unwrap();
    let status = client
        .status_with(StatusRequest {
            pulls: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let matrix = status
        .map
        .unwrap()
        .matrices
        .iter()
        .find(|m| m.name == "ssp")
        .unwrap()
        .id;
    // The server holding the intercept's partition sees every pull (each pulls the intercept).
    let pulls: Vec<&ClockedPull> = status
        .servers
        .iter()
        .map(|s| {
            s.pulls
                .iter()
                .filter(|p| p.matrix_id == matrix)
                .collect::<Vec<_>>()
        })
        .max_by_key(Vec::len)
        .unwrap();
    let workers: std::collections::HashSet<u64> = pulls.iter().map(|p| p.worker).collect();
    assert_eq!(workers.len(), 3);
    let lead = lead(pulls);
    assert!(lead.pairs > 500, "{lead:?}");
    assert!(
        lead.max <= 1,
        "a pull {} clocks ahead with staleness 1",
        lead.max
    );
    assert!(column(epochs, "wait_seconds")[0] > 0.0);
    let ahead = status
        .workers
        .iter()
        .filter(|w| w.model == "ssp" && w.slow)
        .count();
    assert_eq!(ahead, 1, "{:?}", status.workers);

    // SAFETY: as above; no task is running.
    unsafe { std::env::remove_var(angel_training::sync::worker::SLOW_WORKER_VAR) };
    let sql = format!("CREATE MODEL even OPTIONS ({options}) AS SELECT * FROM train");
    let table = job.execute(&sql).await.unwrap();
    assert_eq!(
        text(&table[0], "slow_workers"),
        [""],
        "a normal run flags nobody"
    );
}
