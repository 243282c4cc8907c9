//! Straggler tests, with worker 1 of every model five times slower (ten under model
//! rotation; the `ANGEL_SLOW_WORKER` hook, set for the whole process, so the tests take
//! turns): SSP's bound, checked from the servers' record of pulls, and slow-worker flags;
//! model rotation's time control.

mod common;

use std::collections::HashMap;

use angel_client::PsClient;
use angel_datagen::ratings_data::RatingsSpec;
use angel_proto::pulls::lead;
use angel_proto::{ClockedPull, Lease, StatusRequest};
use angel_training::sync::worker::set_slow_worker;
use common::{a9a_job, column, leases, synthetic_ratings_job, text};

/// Worker 1 of every model is this many times slower.
const SLOWDOWN: f64 = 5.0;
/// The same for model rotation's time control: slow enough that the budget (1.25 times the
/// fast worker's step) cuts its steps clearly even on a busy machine, where the fast worker's
/// steps of the first round, which set it, run long.
const ROTATION_SLOWDOWN: f64 = 10.0;

/// Held by each test for its whole run: the slow worker hook is the process's.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssp_bounds_how_far_ahead_workers_pull_and_a_slow_worker_is_flagged() {
    let _turn = TURN.lock().await;
    let (service, job) = a9a_job().await;
    set_slow_worker(Some((1, SLOWDOWN)));
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

    set_slow_worker(None);
    let sql = format!("CREATE MODEL even OPTIONS ({options}) AS SELECT * FROM train");
    let table = job.execute(&sql).await.unwrap();
    assert_eq!(
        text(&table[0], "slow_workers"),
        [""],
        "a normal run flags nobody"
    );
}

/// Harp's time control. Two rotation workers, worker 1 ten times slower, train the same
/// ratings without and with `step_ms = 'auto'`: with it, from the second epoch on the slow
/// worker hands each slice on after the budget the first epoch's steps set (1.25 times the
/// fast worker's step), training only part of its rows (the rest in later epochs) in much
/// shorter steps, and the model still learns. (The epoch times, against a run without a slow
/// worker, are `bench mf --slow 5`'s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_control_hands_a_slow_workers_slices_on_at_the_others_pace() {
    let _turn = TURN.lock().await;
    set_slow_worker(Some((1, ROTATION_SLOWDOWN)));
    let spec = RatingsSpec {
        users: 1000,
        items: 200,
        ratings: 100_000,
        rank: 4,
        noise: 0.1,
        holdout: 0.1,
    };
    let (service, job) = synthetic_ratings_job(&spec, 2).await;
    let mut holdout = HashMap::new();
    for (model, step) in [("plain", ""), ("timed", ", step_ms = 'auto'")] {
        let sql = format!(
            "CREATE MODEL {model} OPTIONS (kind = 'mf', rank = 4, users = 1000, items = 200, \
             optimizer = 'sgd', learning_rate = 0.03, parallelism = 'rotation', workers = 2, \
             epochs = 4, holdout = 'test'{step}) AS SELECT user, item, rating FROM train"
        );
        let table = job.execute(&sql).await.unwrap();
        holdout.insert(model, column(&table[0], "holdout_rmse"));
    }
    let leases = leases(&service.master_addr()).await;
    let of = |model: &str, round: u32| -> Vec<&Lease> {
        let of_round = leases
            .iter()
            .filter(|l| l.model == model && l.round == round);
        of_round.collect()
    };
    let rows = |leases: &[&Lease], rank: u32| -> u64 {
        (leases.iter())
            .filter(|l| l.rank == rank)
            .map(|l| l.rows)
            .sum()
    };
    // How long the others wait for the slow worker's slices in a round: its steps' total
    // time. (Not its longest step: one step the scheduler preempts on a busy machine takes
    // several times the others, as the hook sleeps in proportion to the time a chunk took.)
    let busy = |leases: &[&Lease]| -> u64 {
        let slow = leases.iter().filter(|l| l.rank == 1);
        slow.map(|l| l.busy_us).sum()
    };
    for round in 2..=4 {
        let (plain, timed) = (of("plain", round), of("timed", round));
        let (all, cut) = (rows(&plain, 1), rows(&timed, 1));
        assert!(
            cut * 10 < all * 6,
            "round {round}: the slow worker trained {cut} of its {all} rows under time control"
        );
        assert!(
            busy(&timed) * 10 < busy(&plain) * 6,
            "round {round}: the slow worker's steps took {} us with time control, {} us \
             without",
            busy(&timed),
            busy(&plain)
        );
    }
    let timed = &holdout["timed"];
    assert!(
        timed[3] < timed[0] && timed[3] < 0.5,
        "holdout RMSE per epoch with time control: {timed:?}"
    );
}
