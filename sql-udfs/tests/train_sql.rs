//! Training from SQL on embedded DataFusion against a real in-process PS: `CREATE MODEL`
//! runs `ps_train` epochs whose optimizer steps happen on the servers.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use angel_client::PsClient;
use angel_datagen::ratings_data::RatingsSpec;
use angel_proto::{ClockedPull, StatusRequest};
use angel_ps_service::{Standalone, StandaloneConfig};
use angel_sql::job::Job;
use datafusion::arrow::array::{AsArray, Float64Array, Int64Array, ListArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, Int64Type, UInt64Type};
use datafusion::prelude::{SessionConfig, SessionContext};

use common::{leases, synthetic_ratings_job};

const TRUE_WEIGHTS: [f64; 8] = [0.5, -1.2, 2.0, 0.0, 0.3, -0.7, 1.5, -0.1];
const TRUE_BIAS: f64 = 0.25;

/// Rows with 8 features uniform in [-1, 1] and the exact linear response.
fn linear_rows(n: usize) -> RecordBatch {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let (mut labels, mut idx, mut val) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let x: Vec<f64> = (0..8).map(|_| uniform()).collect();
        labels.push(x.iter().zip(TRUE_WEIGHTS).map(|(a, b)| a * b).sum::<f64>() + TRUE_BIAS);
        idx.push(Some((0..8u64).map(Some).collect::<Vec<_>>()));
        val.push(Some(x.into_iter().map(Some).collect::<Vec<_>>()));
    }
    RecordBatch::try_from_iter([
        ("label", Arc::new(Float64Array::from(labels)) as _),
        (
            "idx",
            Arc::new(ListArray::from_iter_primitive::<UInt64Type, _, _>(idx)) as _,
        ),
        (
            "val",
            Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(val)) as _,
        ),
    ])
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_regression_recovers_the_generating_weights() {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    ctx.register_batch("rows", linear_rows(20_000)).unwrap();
    let job = Job::new(ctx, &service.master_addr());
    let sql = "CREATE MODEL lin OPTIONS (kind = 'linear', dim = 8, optimizer = 'sgd', \
               learning_rate = 0.1, batch_size = 32, epochs = 6, holdout = 'rows') \
               AS SELECT label, idx, val FROM rows";
    let table = job.execute(sql).await.unwrap();
    let epochs = &table[0];
    assert_eq!(epochs.num_rows(), 6);
    // Key-list caching: the first epoch reads every record batch, later ones find them all.
    let cached = epochs.column_by_name("cached_batches").unwrap();
    let cached = cached
        .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
        .values();
    assert_eq!(cached[0], 0, "{cached:?}");
    assert!(
        cached[1..].iter().all(|&c| c > 0 && c == cached[1]),
        "{cached:?}"
    );
    let holdout = epochs.column(3).as_primitive::<Float64Type>();
    assert!(
        holdout.value(5) < holdout.value(0),
        "holdout error falls: {holdout:?}"
    );

    let client = PsClient::shared(&service.master_addr()).await.unwrap();
    let w: Vec<f32> = client
        .pull_keys("lin", 0, &(0..=8).collect::<Vec<_>>())
        .await
        .unwrap();
    for (i, (&got, want)) in w
        .iter()
        .zip(TRUE_WEIGHTS.iter().chain([&TRUE_BIAS]))
        .enumerate()
    {
        assert!(
            (f64::from(got) - want).abs() < 1e-2,
            "weight {i}: {got} vs {want}"
        );
    }

    // Pulling each mini-batch's weights while the previous one computes (ASP only) learns the
    // same weights.
    job.execute(&sql.replace("lin OPTIONS (", "ahead OPTIONS (pull_ahead = 'true', "))
        .await
        .unwrap();
    let ahead: Vec<f32> = client
        .pull_keys("ahead", 0, &(0..=8).collect::<Vec<_>>())
        .await
        .unwrap();
    for (i, (&got, &want)) in ahead.iter().zip(&w).enumerate() {
        assert!(
            (got - want).abs() < 1e-2,
            "weight {i} pulled ahead: {got} vs {want}"
        );
    }

    let err = job.execute("CREATE MODEL lin OPTIONS (kind = 'linear', dim = 8) AS SELECT label, idx, val FROM rows").await.unwrap_err();
    assert!(err.to_string().contains("'lin' already exists"), "{err}");
    // One row, one task: a failed query's sibling task still asking the master when the
    // service shuts down would retry for a minute (MASTER_WAIT) before the test's runtime ends.
    let err = job
        .execute("SELECT ps_predict('nope', [1, 2])")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    service.shutdown().await.unwrap();
}

/// `pull_ahead` really pulls ahead: a lone worker's pull of each mini-batch normally reads
/// every push it made before (the servers record the version each training pull read), and
/// with `pull_ahead` some of its pulls go out before its previous mini-batch's push. (Each
/// pull ahead is started before that mini-batch's gradients are computed, so with 125
/// mini-batches at least one reads first for certain in practice: 68 to 82 of the 124 did in
/// three runs here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulling_ahead_reads_before_the_previous_push_and_pulling_in_step_never_does() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    ctx.register_batch("rows", linear_rows(4_000)).unwrap();
    let job = Job::new(ctx, &service.master_addr());
    let client = PsClient::shared(&service.master_addr()).await.unwrap();
    let mut ids = Vec::new();
    for (name, ahead) in [("in_step", false), ("ahead", true)] {
        let sql = format!(
            "CREATE MODEL {name} OPTIONS (kind = 'linear', dim = 8, optimizer = 'sgd', \
             learning_rate = 0.1, batch_size = 32, epochs = 1, workers = 1, \
             pull_ahead = '{ahead}') AS SELECT label, idx, val FROM rows"
        );
        job.execute(&sql).await.unwrap();
        ids.push(client.matrix(name).await.unwrap().meta.id);
    }
    let request = StatusRequest {
        pulls: true,
        ..Default::default()
    };
    let status = client.status_with(request).await.unwrap();
    let pulls: Vec<&ClockedPull> = status.servers.iter().flat_map(|s| &s.pulls).collect();
    // Per model: its training pulls, and those that read fewer of the worker's own pushes
    // than its clock (the pushes it made) says, counted from its first pull.
    let missed = |id: u32| {
        let mine: Vec<&&ClockedPull> = pulls.iter().filter(|p| p.matrix_id == id).collect();
        let base = mine.first().map_or(0, |p| p.version as i64 - p.clock);
        let behind = mine.iter().filter(|p| (p.version as i64 - p.clock) < base);
        (mine.len(), behind.count())
    };
    let (in_step, ahead) = (missed(ids[0]), missed(ids[1]));
    assert!(in_step.0 >= 125 && ahead.0 >= 125, "{in_step:?} {ahead:?}");
    assert_eq!(in_step.1, 0, "a pull in step missed a push: {in_step:?}");
    assert!(ahead.1 > 0, "no pull went out ahead of a push: {ahead:?}");
    service.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_names_the_line_of_the_failing_statement_and_unknown_variables() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let job = Job::new(SessionContext::new(), &service.master_addr());
    let vars = HashMap::from([("n".to_string(), "3".to_string())]);
    let text =
        "SELECT ${n} AS three;\n\nCREATE MODEL m OPTIONS (kind = 'logistic') AS SELECT 1, 2;";
    let mut seen = Vec::new();
    let err = job
        .run("bad.sql", text, &vars, |r| seen.push(r.line))
        .await
        .unwrap_err();
    assert_eq!(seen, vec![1]);
    let err = err.to_string();
    assert!(err.contains("bad.sql:3"), "{err}");
    assert!(err.contains("dim") && err.contains("counter"), "{err}");
    let err = job
        .run("v.sql", "SELECT ${rows}", &vars, |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("${rows}"), "{err}");
    service.shutdown().await.unwrap();
}

/// A softmax model over 3 classes and 6 features: the generating weights and intercepts.
const CLASS_WEIGHTS: [[f64; 7]; 3] = [
    [1.5, -1.0, 0.0, 0.8, -0.5, 0.2, 0.3],
    [-0.7, 1.2, 1.0, -0.4, 0.0, -0.9, 0.0],
    [0.0, 0.3, -1.4, 0.5, 1.1, 0.6, -0.2],
];

/// The generating model's class probabilities for features `x`.
fn true_probabilities(x: &[f64]) -> Vec<f64> {
    let margins: Vec<f64> = CLASS_WEIGHTS
        .iter()
        .map(|w| w[..6].iter().zip(x).map(|(a, b)| a * b).sum::<f64>() + w[6])
        .collect();
    let z: f64 = margins.iter().map(|m| m.exp()).sum();
    margins.iter().map(|m| m.exp() / z).collect()
}

/// `n` rows of 6 features uniform in [-1, 1], each labelled with a class drawn from the
/// generating model; and, as the reference, that model's accuracy (predicting its most likely
/// class) and mean cross-entropy on them: what no model can beat on average.
fn class_rows(n: usize, seed: u64) -> (RecordBatch, f64, f64) {
    let mut state = seed;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let (mut labels, mut idx, mut val) = (Vec::new(), Vec::new(), Vec::new());
    let (mut right, mut entropy) = (0usize, 0.0);
    for _ in 0..n {
        let x: Vec<f64> = (0..6).map(|_| uniform() * 2.0 - 1.0).collect();
        let p = true_probabilities(&x);
        let u = uniform();
        let class = (0..3)
            .find(|&c| u < p[..=c].iter().sum::<f64>())
            .unwrap_or(2);
        let best = (0..3).fold(0, |b, c| if p[c] > p[b] { c } else { b });
        right += usize::from(best == class);
        entropy -= p[class].ln();
        labels.push(class as f64);
        idx.push(Some((0..6u64).map(Some).collect::<Vec<_>>()));
        val.push(Some(x.into_iter().map(Some).collect::<Vec<_>>()));
    }
    let batch = RecordBatch::try_from_iter([
        ("label", Arc::new(Float64Array::from(labels)) as _),
        (
            "idx",
            Arc::new(ListArray::from_iter_primitive::<UInt64Type, _, _>(idx)) as _,
        ),
        (
            "val",
            Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(val)) as _,
        ),
    ])
    .unwrap();
    (batch, right as f64 / n as f64, entropy / n as f64)
}

/// A column of the epoch table by name.
fn epoch_column(table: &RecordBatch, name: &str) -> Vec<f64> {
    let column = table.column_by_name(name).unwrap();
    column.as_primitive::<Float64Type>().values().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn softmax_learns_the_generating_classes_under_every_optimizer_and_sync_mode() {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    let (train, _, _) = class_rows(8_000, 0x9e37_79b9_7f4a_7c15);
    let (holdout, bayes_accuracy, true_entropy) = class_rows(4_000, 0x2545_f491_4f6c_dd1d);
    ctx.register_batch("train", train).unwrap();
    ctx.register_batch("holdout", holdout).unwrap();
    let job = Job::new(ctx, &service.master_addr());
    // Reference: the generating model on the holdout rows. Tolerances: 0.03 of accuracy and
    // 0.03 nats, a few standard errors of 4,000 rows (and well under the gap to a model that
    // learnt nothing: accuracy 1/3, cross-entropy ln 3 = 1.10).
    for (name, options) in [
        (
            "s_adam",
            "optimizer = 'adam', learning_rate = 0.05, sync = 'asp'",
        ),
        (
            "s_adagrad",
            "optimizer = 'adagrad', learning_rate = 0.3, sync = 'bsp'",
        ),
        (
            "s_ftrl",
            "optimizer = 'ftrl', learning_rate = 0.3, sync = 'ssp', staleness = 2",
        ),
        (
            "s_sgd_avg",
            "optimizer = 'sgd', learning_rate = 0.3, sync = 'bsp', update = 'average'",
        ),
        (
            "s_dynsgd",
            "optimizer = 'sgd', learning_rate = 0.3, sync = 'asp', update = 'dynsgd'",
        ),
    ] {
        let sql = format!(
            "CREATE MODEL {name} OPTIONS (kind = 'softmax', classes = 3, dim = 6, {options}, \
             batch_size = 64, epochs = 4, holdout = 'holdout') AS SELECT label, idx, val FROM train"
        );
        let table = &job.execute(&sql).await.unwrap()[0];
        let accuracy = epoch_column(table, "holdout_accuracy")[3];
        let loss = epoch_column(table, "holdout_loss")[3];
        assert!(
            accuracy > bayes_accuracy - 0.03,
            "{name}: holdout accuracy {accuracy} vs the generating model's {bayes_accuracy}"
        );
        assert!(
            loss < true_entropy + 0.03,
            "{name}: holdout cross-entropy {loss} vs the generating model's {true_entropy}"
        );
    }

    // The SQL functions agree with the epoch table and with each other.
    let scored = job
        .execute(
            "SELECT ps_accuracy(label, ps_predict('s_adam', idx, val)) AS acc, \
             avg(ps_loss('s_adam', label, idx, val)) AS loss, \
             max(abs(array_sum(ps_predict_proba('s_adam', idx, val)) - 1.0)) AS off, \
             sum(CASE WHEN array_position(ps_predict_proba('s_adam', idx, val), \
                 array_max(ps_predict_proba('s_adam', idx, val))) - 1 \
                 = ps_predict('s_adam', idx, val) THEN 0 ELSE 1 END) AS disagree \
             FROM holdout",
        )
        .await
        .unwrap();
    let row = &scored[0];
    let value = |i: usize| row.column(i).as_primitive::<Float64Type>().value(0);
    let table = job.execute("SELECT * FROM s_adam_epochs").await.unwrap();
    assert!((value(0) - epoch_column(&table[0], "holdout_accuracy")[3]).abs() < 1e-12);
    assert!((value(1) - epoch_column(&table[0], "holdout_loss")[3]).abs() < 1e-9);
    assert!(
        value(2) < 1e-9,
        "probabilities sum to 1, off by {}",
        value(2)
    );
    let disagree = row
        .column(3)
        .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
    assert_eq!(disagree.value(0), 0, "ps_predict is the most likely class");

    // Saved and loaded, a softmax model predicts the same classes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display();
    job.execute(&format!("SAVE MODEL s_adam TO '{path}'"))
        .await
        .unwrap();
    job.execute(&format!("LOAD MODEL s_loaded FROM '{path}'"))
        .await
        .unwrap();
    let same = job
        .execute(
            "SELECT count(*) AS n FROM holdout \
             WHERE ps_predict('s_adam', idx, val) <> ps_predict('s_loaded', idx, val)",
        )
        .await
        .unwrap();
    let n = same[0]
        .column(0)
        .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
    assert_eq!(n.value(0), 0);

    // Refusals name what is wrong.
    for (sql, named) in [
        (
            "CREATE MODEL bad OPTIONS (kind = 'softmax', dim = 6) AS SELECT label, idx, val FROM train",
            "needs the option classes",
        ),
        (
            "CREATE MODEL bad2 OPTIONS (kind = 'softmax', classes = 2, dim = 6) \
             AS SELECT label, idx, val FROM train",
            "not a class of this softmax model (whole numbers from 0 to 1)",
        ),
        (
            "CREATE MODEL bad3 OPTIONS (kind = 'softmax', classes = 1, dim = 6) \
             AS SELECT label, idx, val FROM train",
            "classes = '1' is not allowed",
        ),
    ] {
        let err = job.execute(sql).await.unwrap_err().to_string();
        assert!(err.contains(named), "{sql}: {err}");
    }
    job.execute(
        "CREATE MODEL lin OPTIONS (kind = 'linear', dim = 6, epochs = 1) \
         AS SELECT label, idx, val FROM train",
    )
    .await
    .unwrap();
    let err = job
        .execute("SELECT ps_predict_proba('lin', [0, 1], [0.5, 0.5])")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("predicts no probabilities"), "{err}");
    service.shutdown().await.unwrap();
}

/// Every row of model `name`'s matrix (weights and optimizer state of every output).
async fn matrix_rows(master: &str, name: &str) -> Vec<Vec<f32>> {
    let client = PsClient::connect(master).await.unwrap();
    let rows = client.matrix(name).await.unwrap().meta.rows;
    client
        .pull_rows(name, &(0..rows).collect::<Vec<_>>())
        .await
        .unwrap()
}

/// Warm start: under BSP, 2 epochs in one statement give the same model, weights and
/// optimizer state bit for bit, as 1 epoch, `SAVE MODEL`, `LOAD MODEL` into a fresh service and
/// `TRAIN MODEL` for 1 more. (BSP orders every push the same way at every run; the saved f32
/// weights and state, Adam's per-key update counts included, are what the servers hold.) The
/// rows are dense: every mini-batch uses the same keys, which once left the order of BSP's
/// workers to chance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_model_trains_on_exactly_where_it_stopped() {
    let (rows, _, _) = class_rows(1_500, 0x1234_5678_9abc_def1);
    // One partition to read the rows in a fixed order (a repartitioned scan may interleave its
    // batches differently at every run); `workers = 2` trains them as two tasks.
    let session = || {
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
        ctx.register_batch("train", rows.clone()).unwrap();
        ctx
    };
    let create = |epochs: usize| {
        format!(
            "CREATE MODEL m OPTIONS (kind = 'softmax', classes = 3, dim = 6, optimizer = 'adam', \
             learning_rate = 0.05, l2 = 0.001, sync = 'bsp', workers = 2, batch_size = 50, \
             epochs = {epochs}) \
             AS SELECT label, idx, val FROM train"
        )
    };
    let whole = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    Job::new(session(), &whole.master_addr())
        .execute(&create(2))
        .await
        .unwrap();
    let in_one = matrix_rows(&whole.master_addr(), "m").await;
    whole.shutdown().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display();
    let first = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let job = Job::new(session(), &first.master_addr());
    job.execute(&create(1)).await.unwrap();
    job.execute(&format!("SAVE MODEL m TO '{path}'"))
        .await
        .unwrap();
    first.shutdown().await.unwrap();
    let fresh = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let job = Job::new(session(), &fresh.master_addr());
    job.execute(&format!("LOAD MODEL m FROM '{path}'"))
        .await
        .unwrap();
    let table = job
        .execute("TRAIN MODEL m OPTIONS (epochs = 1) AS SELECT label, idx, val FROM train")
        .await
        .unwrap();
    assert_eq!(table[0].num_rows(), 1, "one epoch table row");
    let resumed = matrix_rows(&fresh.master_addr(), "m").await;
    assert_eq!(
        in_one.len(),
        12,
        "3 classes x (weights + Adam's 3 state rows)"
    );
    assert!(in_one[3].iter().all(|&n| n == 60.0), "60 updates per key");
    assert_eq!(resumed, in_one);

    let err = job
        .execute("TRAIN MODEL m OPTIONS (learning_rate = 1) AS SELECT label, idx, val FROM train")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("option 'learning_rate' is the model's own"),
        "{err}"
    );
    let err = job
        .execute("TRAIN MODEL nope AS SELECT label, idx, val FROM train")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("TRAIN MODEL nope: no model of that name"),
        "{err}"
    );
    fresh.shutdown().await.unwrap();
}

/// `SAVE MODEL` of a hashed model far wider than any dense pull (2^40 columns, once
/// unsaveable past 2^28) saves exactly the keys its servers hold, page by page (over 2^18 a
/// block, so each block takes two pages, with the weights' and the state's keys apart), and
/// `LOAD MODEL` into a fresh service gives back every weight and state value bit for bit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hashed_model_saves_the_keys_it_holds_and_loads_back_exact() {
    let dim = 1u64 << 40;
    let session = || {
        let ctx = SessionContext::new();
        ctx.register_batch("rows", linear_rows(200)).unwrap();
        ctx
    };
    let first = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let job = Job::new(session(), &first.master_addr());
    job.execute(&format!(
        "CREATE MODEL wide OPTIONS (kind = 'logistic', dim = {dim}, optimizer = 'adagrad', \
         epochs = 1) AS SELECT CASE WHEN label > 0 THEN 1.0 ELSE 0.0 END AS label, idx, val \
         FROM rows"
    ))
    .await
    .unwrap();
    // Keys spread over the whole width: the weights' and the state's sets overlap in part.
    let client = PsClient::connect(&first.master_addr()).await.unwrap();
    let spread = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 24) % dim;
    let weights: Vec<u64> = (0..1_200_000).map(spread).collect();
    let state: Vec<u64> = (600_000..1_500_000).map(spread).collect();
    let value = |k: u64| ((k % 1000) as f32 - 499.5) / 64.0;
    for (row, keys) in [(0, &weights), (1, &state)] {
        for chunk in keys.chunks(200_000) {
            let values: Vec<f32> = chunk.iter().map(|&k| value(k)).collect();
            client.push_keys("wide", row, chunk, &values).await.unwrap();
        }
    }
    let mut every: Vec<u64> = weights.iter().chain(&state).copied().collect();
    every.extend(0..=8);
    every.push(dim);
    every.sort_unstable();
    every.dedup();
    let held = |master: String, keys: Vec<u64>| async move {
        let client = PsClient::connect(&master).await.unwrap();
        let mut rows = Vec::new();
        for row in 0..2 {
            rows.push(client.pull_keys::<f32>("wide", row, &keys).await.unwrap());
        }
        rows
    };
    let before = held(first.master_addr(), every.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display();
    job.execute(&format!("SAVE MODEL wide TO '{path}'"))
        .await
        .unwrap();
    first.shutdown().await.unwrap();

    let fresh = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let job = Job::new(session(), &fresh.master_addr());
    let saved = job
        .execute(&format!("SELECT count(*) AS n FROM read_model('{path}')"))
        .await
        .unwrap();
    let stored = (0..every.len())
        .filter(|&i| before[0][i] != 0.0 || before[1][i] != 0.0 || every[i] == dim)
        .count();
    let n = saved[0].column(0).as_primitive::<Int64Type>().value(0);
    assert_eq!(
        n as usize, stored,
        "one row per key held, and the intercept"
    );
    assert!(n > 1_400_000, "the keys pushed: {n}");
    job.execute(&format!("LOAD MODEL wide FROM '{path}'"))
        .await
        .unwrap();
    let after = held(fresh.master_addr(), every).await;
    assert!(
        before == after,
        "every weight and state value loads back exact"
    );
    fresh.shutdown().await.unwrap();
}

/// The linear SVM from SQL, against the hyperplane that labelled the rows (a closed-form
/// reference: it separates them all). Hinge loss keeps pushing the margin past 1, so the
/// learnt sign agrees with the generating one on nearly every holdout row; tolerance 2% of
/// rows (those within a hair of the hyperplane). FTRL is held to its reference in the softmax
/// test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_svm_separates_what_a_hyperplane_labelled() {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    ctx.register_batch("rows", linear_rows(6_000)).unwrap();
    let job = Job::new(ctx, &service.master_addr());
    // Labels: the side of the generating hyperplane (linear_rows' response) each row is on.
    job.execute(
        "CREATE VIEW sides AS SELECT CASE WHEN label > 0 THEN 1.0 ELSE 0.0 END AS y, idx, val \
         FROM rows",
    )
    .await
    .unwrap();
    let table = job
        .execute(
            "CREATE MODEL svm OPTIONS (kind = 'svm', dim = 8, optimizer = 'adagrad', \
             learning_rate = 0.5, batch_size = 32, epochs = 5, holdout = 'sides') \
             AS SELECT y, idx, val FROM sides",
        )
        .await
        .unwrap();
    let auc = epoch_column(&table[0], "holdout_auc");
    assert!(auc[4] > 0.999, "holdout AUC {auc:?}");
    let wrong = job
        .execute(
            "SELECT avg(CASE WHEN (ps_predict('svm', idx, val) > 0) = (y > 0) THEN 0.0 ELSE 1.0 END) \
             FROM sides",
        )
        .await
        .unwrap();
    let wrong = wrong[0].column(0).as_primitive::<Float64Type>().value(0);
    assert!(wrong < 0.02, "{wrong} of the rows on the wrong side");
    service.shutdown().await.unwrap();
}

/// Ratings of `users` x `items` from a rank-2 model plus noise, in a shuffled order: (user,
/// item, rating) with every pair rated at most once.
fn ratings(users: i64, items: i64, n: usize) -> RecordBatch {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let factor = |id: i64, f: i64| ((id * 7 + f * 3) % 5) as f64 / 4.0 - 0.5;
    let mut pairs: Vec<(i64, i64)> = (0..users)
        .flat_map(|u| (0..items).map(move |i| (u, i)))
        .collect();
    for k in (1..pairs.len()).rev() {
        pairs.swap(k, (next() % (k as u64 + 1)) as usize);
    }
    pairs.truncate(n);
    let rating = |&(u, i): &(i64, i64)| {
        let noise = (next() % 1000) as f64 / 5000.0 - 0.1;
        3.0 + (0..2).map(|f| factor(u, f) * factor(i, f + 1)).sum::<f64>() * 2.0 + noise
    };
    let rated: Vec<f64> = pairs.iter().map(rating).collect();
    RecordBatch::try_from_iter([
        (
            "user",
            Arc::new(Int64Array::from_iter_values(pairs.iter().map(|p| p.0))) as _,
        ),
        (
            "item",
            Arc::new(Int64Array::from_iter_values(pairs.iter().map(|p| p.1))) as _,
        ),
        ("rating", Arc::new(Float64Array::from(rated)) as _),
    ])
    .unwrap()
}

/// The (user column, item column, rating) rows of `batch` (item columns after the users').
fn rated_pairs(batch: &RecordBatch, users: usize) -> Vec<(usize, usize, f64)> {
    let column = |name| batch.column_by_name(name).unwrap().clone();
    let (u, i, r) = (column("user"), column("item"), column("rating"));
    let (u, i) = (u.as_primitive::<Int64Type>(), i.as_primitive::<Int64Type>());
    let r = r.as_primitive::<Float64Type>();
    (0..r.len())
        .map(|k| (u.value(k) as usize, users + i.value(k) as usize, r.value(k)))
        .collect()
}

/// A rank-2 matrix factorization model's prediction from its matrix rows `w` (two factor
/// rows, then the biases) around `mean`.
fn mf_predict(w: &[Vec<f32>], mean: f64, u: usize, i: usize) -> f64 {
    let dot: f64 = (0..2)
        .map(|f| f64::from(w[f][u]) * f64::from(w[f][i]))
        .sum();
    mean + f64::from(w[2][u]) + f64::from(w[2][i]) + dot
}

/// Sequential SGD over `rows` from `w`, as `surprise`'s SVD runs it, each weight kept in f32
/// (and each gradient too when `f32_gradients`, as a push sends it).
fn sgd_pass(w: &mut [Vec<f32>], rows: &[(usize, usize, f64)], mean: f64, f32_gradients: bool) {
    let (lr, l2) = (MF_RATE, MF_L2);
    for &(u, i, rating) in rows {
        let e = mf_predict(w, mean, u, i) - rating;
        let pulled = w.to_vec();
        for row in 0..3 {
            let (gu, gi) = match row {
                2 => (e, e),
                f => (e * f64::from(pulled[f][i]), e * f64::from(pulled[f][u])),
            };
            for (key, g) in [(u, gu), (i, gi)] {
                let g = if f32_gradients {
                    f64::from(g as f32)
                } else {
                    g
                };
                let old = f64::from(pulled[row][key]);
                w[row][key] = (old - lr * (g + l2 * old)) as f32;
            }
        }
    }
}

/// Every user and item weight of `ours` within 1e-6 of `theirs`.
fn assert_same_factors(ours: &[Vec<f32>], theirs: &[Vec<f32>], keys: usize) {
    for row in 0..3 {
        for key in 0..keys {
            let (a, b) = (ours[row][key], theirs[row][key]);
            assert!(
                (a - b).abs() < 1e-6,
                "row {row} key {key}: servers {a}, reference {b}"
            );
        }
    }
}

const MF_RATE: f64 = 0.05;
const MF_L2: f64 = 0.01;
const MF_USERS: usize = 12;
const MF_ITEMS: usize = 9;

/// `CREATE MODEL recs` of rank 2 over the `ratings` table with `options`.
fn create_mf(options: &str) -> String {
    format!(
        "CREATE MODEL recs OPTIONS (kind = 'mf', rank = 2, users = {MF_USERS}, items = \
         {MF_ITEMS}, optimizer = 'sgd', learning_rate = {MF_RATE}, l2 = {MF_L2}, {options}) \
         AS SELECT user, item, rating FROM ratings"
    )
}

/// A job with the ratings `batch` as table `ratings`, read as one partition (in order).
async fn ratings_job(batch: &RecordBatch) -> (Standalone, Job) {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    ctx.register_batch("ratings", batch.clone()).unwrap();
    let job = Job::new(ctx, &service.master_addr());
    (service, job)
}

/// Matrix factorization trained by one worker with mini-batches of one rating and `sgd` is
/// sequential SGD over the ratings in their order, as `surprise`'s SVD runs it: one epoch of
/// `TRAIN MODEL` from the servers' model equals the same epoch written out here (within 1e-6:
/// both round each weight and gradient to f32 the same way). Predictions, `ps_rmse` and the
/// epoch table's RMSE columns agree with the same arithmetic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_factorization_with_one_worker_is_sequential_sgd() {
    let batch = ratings(MF_USERS as i64, MF_ITEMS as i64, 80);
    let (service, job) = ratings_job(&batch).await;
    let table = job
        .execute(&create_mf(
            "batch_size = 1, epochs = 1, holdout = 'ratings'",
        ))
        .await
        .unwrap();
    let train_loss = epoch_column(&table[0], "train_loss")[0];
    let train_rmse = epoch_column(&table[0], "train_rmse")[0];
    assert!((train_rmse - (2.0 * train_loss).sqrt()).abs() < 1e-12);
    let holdout_rmse = epoch_column(&table[0], "holdout_rmse")[0];
    assert!(holdout_rmse > 0.0 && holdout_rmse < 2.0, "{holdout_rmse}");
    let before = matrix_rows(&service.master_addr(), "recs").await;
    assert_eq!(before.len(), 3, "2 factor rows and the biases' row");
    assert_eq!(before[0].len(), MF_USERS + MF_ITEMS + 1);
    assert_ne!(
        before[0], before[1],
        "each factor starts from values of its own"
    );
    job.execute("TRAIN MODEL recs OPTIONS (epochs = 1) AS SELECT user, item, rating FROM ratings")
        .await
        .unwrap();
    let after = matrix_rows(&service.master_addr(), "recs").await;

    let rows = rated_pairs(&batch, MF_USERS);
    let mean = rows.iter().map(|r| r.2).sum::<f64>() / rows.len() as f64;
    let mut w = before.clone();
    sgd_pass(&mut w, &rows, mean, true);
    assert_same_factors(&after, &w, MF_USERS + MF_ITEMS);

    let scored = job
        .execute("SELECT ps_predict('recs', user, item) AS p FROM ratings")
        .await
        .unwrap();
    let rmse = job
        .execute("SELECT ps_rmse(rating, ps_predict('recs', user, item)) FROM ratings")
        .await
        .unwrap();
    let p = scored[0].column(0).as_primitive::<Float64Type>();
    let mut squared = 0.0;
    for (r, &(u, i, rating)) in rows.iter().enumerate() {
        let expected = mf_predict(&after, mean, u, i);
        assert!((p.value(r) - expected).abs() < 1e-9, "row {r}");
        squared += (expected - rating).powi(2);
    }
    let rmse = rmse[0].column(0).as_primitive::<Float64Type>().value(0);
    assert!((rmse - (squared / rows.len() as f64).sqrt()).abs() < 1e-9);

    let err = job
        .execute("SELECT ps_predict('recs', user, 40) FROM ratings")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("item of row 0") && err.contains("items = 9"),
        "{err}"
    );
}

/// Model rotation with one worker is sequential SGD over the ratings slice after slice, in
/// the order the master leased the slices (Harp's consistency): two `TRAIN MODEL` epochs from
/// the servers' model (the worker keeping its users' factors from the first to the second)
/// equal those passes written out here, within 1e-6.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_with_one_worker_is_sequential_sgd_in_the_leased_order() {
    let batch = ratings(MF_USERS as i64, MF_ITEMS as i64, 80);
    let (service, job) = ratings_job(&batch).await;
    job.execute(&create_mf(
        "parallelism = 'rotation', workers = 1, epochs = 1",
    ))
    .await
    .unwrap();
    let before = matrix_rows(&service.master_addr(), "recs").await;
    job.execute("TRAIN MODEL recs OPTIONS (epochs = 2) AS SELECT user, item, rating FROM ratings")
        .await
        .unwrap();
    let after = matrix_rows(&service.master_addr(), "recs").await;
    let mut trained: Vec<_> = leases(&service.master_addr())
        .await
        .into_iter()
        .filter(|l| l.round > 1)
        .collect();
    trained.sort_by_key(|l| (l.round, l.step));
    assert_eq!(trained.len(), 4, "one worker, two slices, two epochs");

    let rows = rated_pairs(&batch, MF_USERS);
    let mean = rows.iter().map(|r| r.2).sum::<f64>() / rows.len() as f64;
    let slice_of = |i: usize| (i - MF_USERS) * 2 / MF_ITEMS;
    let mut w = before.clone();
    for lease in &trained {
        let of_slice: Vec<_> = (rows.iter().copied())
            .filter(|&(_, i, _)| slice_of(i) == lease.slice as usize)
            .collect();
        sgd_pass(&mut w, &of_slice, mean, false);
    }
    assert_same_factors(&after, &w, MF_USERS + MF_ITEMS);
}

/// Three workers rotating six slices over two epochs: the lease record shows no slice held by
/// two workers at once, and every slice visiting every worker once per epoch; the model
/// learns (the training RMSE falls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_leases_are_exclusive_and_visit_every_worker_once_an_epoch() {
    let batch = ratings(40, 30, 900);
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(3));
    ctx.register_batch("ratings", batch).unwrap();
    let job = Job::new(ctx, &service.master_addr());
    let table = job
        .execute(
            "CREATE MODEL recs OPTIONS (kind = 'mf', rank = 2, users = 40, items = 30, \
             optimizer = 'sgd', learning_rate = 0.05, parallelism = 'rotation', workers = 3, \
             epochs = 2) AS SELECT user, item, rating FROM ratings",
        )
        .await
        .unwrap();
    let rmse = epoch_column(&table[0], "train_rmse");
    assert!(rmse[1] < rmse[0], "{rmse:?}");
    let leases = leases(&service.master_addr()).await;
    assert_eq!(leases.len(), 2 * 3 * 6);
    for a in &leases {
        for b in &leases {
            let other = (a.step, a.rank) != (b.step, b.rank);
            let overlap = a.start_us < b.end_us && b.start_us < a.end_us;
            assert!(
                !(other && a.round == b.round && a.slice == b.slice && overlap),
                "slice {} held by ranks {} and {} at once",
                a.slice,
                a.rank,
                b.rank
            );
        }
    }
    for round in [1, 2] {
        let of_round = leases.iter().filter(|l| l.round == round);
        let rows: u64 = of_round.map(|l| l.rows).sum();
        assert_eq!(rows, 900, "round {round}: every rating trained once");
        let visits: HashSet<(u32, u32)> = (leases.iter())
            .filter(|l| l.round == round)
            .map(|l| (l.slice, l.rank))
            .collect();
        assert_eq!(
            visits.len(),
            18,
            "round {round}: every slice met every worker once"
        );
    }
}

/// Angel's hybrid parallelism: four workers in two groups rotate within their group (leases
/// exclusive within it, each slice meeting each member once an epoch) while the groups share
/// the item factors through the PS; every rating trains once an epoch and the model learns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_groups_rotate_within_each_group_and_share_the_model() {
    let batch = ratings(40, 30, 900);
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(4));
    ctx.register_batch("ratings", batch).unwrap();
    let job = Job::new(ctx, &service.master_addr());
    let table = job
        .execute(
            "CREATE MODEL recs OPTIONS (kind = 'mf', rank = 2, users = 40, items = 30, \
             optimizer = 'sgd', learning_rate = 0.05, parallelism = 'rotation', workers = 4, \
             groups = 2, epochs = 2) AS SELECT user, item, rating FROM ratings",
        )
        .await
        .unwrap();
    let rmse = epoch_column(&table[0], "train_rmse");
    assert!(rmse[1] < rmse[0], "{rmse:?}");
    let leases = leases(&service.master_addr()).await;
    assert_eq!(
        leases.len(),
        2 * 2 * 2 * 4,
        "rounds x groups x members x slices"
    );
    for a in &leases {
        for b in &leases {
            let overlap = a.start_us < b.end_us && b.start_us < a.end_us;
            let shared = (a.round, a.group, a.slice) == (b.round, b.group, b.slice);
            assert!(!(shared && a.rank != b.rank && overlap), "{a:?} and {b:?}");
        }
    }
    for round in [1, 2] {
        let of_round: Vec<_> = leases.iter().filter(|l| l.round == round).collect();
        let visits: HashSet<(u32, u32, u32)> = of_round
            .iter()
            .map(|l| (l.group, l.rank, l.slice))
            .collect();
        assert_eq!(visits.len(), 16, "round {round}");
        assert_eq!(of_round.iter().map(|l| l.rows).sum::<u64>(), 900);
    }
    let err = job
        .execute(
            "CREATE MODEL odd OPTIONS (kind = 'mf', users = 40, items = 30, optimizer = 'sgd', \
             parallelism = 'rotation', workers = 3, groups = 2) AS SELECT user, item, rating \
             FROM ratings",
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("groups = 2 must divide workers = 3"), "{err}");
}

/// On synthetic ratings of a rank-4 model with noise sigma 0.1 (the floor no model goes
/// below), two rotation workers reach a holdout RMSE within 10% of sigma. Sequential SGD with
/// the same rank, rate and epochs reaches 0.1063 on data of this shape (a plain loop in
/// Python over the generator's files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_reaches_the_noise_floor_of_synthetic_ratings() {
    let spec = RatingsSpec {
        users: 500,
        items: 200,
        ratings: 60_000,
        rank: 4,
        noise: 0.1,
        holdout: 0.1,
    };
    let (_service, job) = synthetic_ratings_job(&spec, 2).await;
    let table = job
        .execute(
            "CREATE MODEL recs OPTIONS (kind = 'mf', rank = 4, users = 500, items = 200, \
             optimizer = 'sgd', learning_rate = 0.03, l2 = 0, parallelism = 'rotation', \
             workers = 2, epochs = 6, holdout = 'test') AS SELECT user, item, rating FROM train",
        )
        .await
        .unwrap();
    let holdout = epoch_column(&table[0], "holdout_rmse");
    let last = holdout[holdout.len() - 1];
    assert!(
        last <= 1.1 * spec.noise,
        "holdout RMSE per epoch {holdout:?}, noise sigma {}",
        spec.noise
    );
}

/// Save, load into a fresh service, predict: identical predictions and recommendations.
/// `ps_recommend` ranks the items a user did not rate by the rating the model predicts (the
/// same arithmetic written out here), and leaves out the listed items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_factorization_predicts_and_recommends_the_same_after_loading() {
    let batch = ratings(MF_USERS as i64, MF_ITEMS as i64, 70);
    let (service, job) = ratings_job(&batch).await;
    job.execute(&create_mf("epochs = 2")).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recs").display().to_string();
    job.execute(&format!("SAVE MODEL recs TO '{path}'"))
        .await
        .unwrap();
    let predict = "SELECT user, item, ps_predict('recs', user, item) AS p FROM ratings \
                   ORDER BY user, item";
    let recommend = "SELECT user, ps_recommend('recs', user, 3, array_agg(item)) AS top \
                     FROM ratings GROUP BY user ORDER BY user";
    let (predicted, recommended) = (
        job.execute(predict).await.unwrap(),
        job.execute(recommend).await.unwrap(),
    );
    let w = matrix_rows(&service.master_addr(), "recs").await;
    drop(service);

    let (_fresh, loaded) = ratings_job(&batch).await;
    loaded
        .execute(&format!("LOAD MODEL recs FROM '{path}'"))
        .await
        .unwrap();
    assert_eq!(loaded.execute(predict).await.unwrap(), predicted);
    assert_eq!(loaded.execute(recommend).await.unwrap(), recommended);

    let rows = rated_pairs(&batch, MF_USERS);
    let mean = rows.iter().map(|r| r.2).sum::<f64>() / rows.len() as f64;
    let lists = recommended[0].column(1).as_list::<i32>();
    let users = recommended[0].column(0).as_primitive::<Int64Type>();
    for r in 0..users.len() {
        let u = users.value(r) as usize;
        let rated: HashSet<usize> = (rows.iter())
            .filter(|p| p.0 == u)
            .map(|p| p.1 - MF_USERS)
            .collect();
        let mut expected: Vec<(f64, usize)> = (0..MF_ITEMS)
            .filter(|i| !rated.contains(i))
            .map(|i| (mf_predict(&w, mean, u, MF_USERS + i), i))
            .collect();
        expected.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let expected: Vec<i64> = expected.iter().take(3).map(|e| e.1 as i64).collect();
        let got = lists.value(r);
        let got: Vec<i64> = got.as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(got, expected, "user {u}, who rated {rated:?}");
    }
    let err = job_error(&loaded, "SELECT ps_recommend('recs', user, 0) FROM ratings").await;
    assert!(err.contains("k") && err.contains("from 1"), "{err}");
    let err = job_error(&loaded, "SELECT ps_recommend('recs', 99, 2) FROM ratings").await;
    assert!(
        err.contains("user of row 0") && err.contains("is 99"),
        "{err}"
    );
}

/// The error a statement of `job` fails with.
async fn job_error(job: &Job, sql: &str) -> String {
    job.execute(sql).await.unwrap_err().to_string()
}
