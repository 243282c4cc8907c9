//! Factorization machines (`kind = 'fm'`) on a real in-process service, on rows whose label
//! depends on pairs of features (`angel_datagen::interaction_data`): the model reaches the
//! generator's own holdout AUC, logistic regression on the same rows cannot, and the model
//! saves, loads and predicts the same.

mod common;

use angel_datagen::interaction_data::{self, Hidden, InteractionSpec};
use angel_ps_service::{Standalone, StandaloneConfig};
use angel_sql::job::Job;
use angel_sql::ps_auc::auc;
use common::column;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Float64Type;
use datafusion::prelude::{SessionConfig, SessionContext};

/// 6 fields of 20 categories (120 features), a rank-3 hidden model, 60,000 rows, 1 in 6 held
/// out.
const SPEC: InteractionSpec = InteractionSpec {
    rows: 60_000,
    fields: 6,
    categories: 20,
    rank: 3,
    holdout: 1.0 / 6.0,
};
const SEED: u64 = 11;

/// A job with the generated rows as tables `train` and `test` on a service of two servers,
/// and the AUC of the hidden model's own probabilities on `test`.
async fn interaction_job(dir: &std::path::Path) -> (Standalone, Job, f64) {
    let (train, test) = (dir.join("train.libsvm"), dir.join("test.libsvm"));
    interaction_data::generate(&train, &test, &SPEC, SEED).unwrap();
    let hidden = Hidden::new(&SPEC, SEED);
    let (mut scores, mut labels) = (Vec::new(), Vec::new());
    for line in std::fs::read_to_string(&test).unwrap().lines() {
        let mut parts = line.split(' ');
        labels.push(parts.next().unwrap().parse::<f64>().unwrap());
        let features: Vec<u64> = parts
            .map(|p| p.strip_suffix(":1").unwrap().parse().unwrap())
            .collect();
        scores.push(hidden.probability(&features));
    }
    let generator_auc = auc(&scores, &labels).unwrap();

    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let config = SessionConfig::new().with_target_partitions(2);
    let job = Job::new(
        SessionContext::new_with_config(config),
        &service.master_addr(),
    );
    for (table, file) in [("train", &train), ("test", &test)] {
        let sql = format!(
            "CREATE TABLE {table} AS SELECT label, idx, val FROM read_libsvm('{}', \
             'index_base=0')",
            file.display()
        );
        job.execute(&sql).await.unwrap();
    }
    (service, job, generator_auc)
}

/// The last epoch's holdout AUC of `CREATE MODEL name OPTIONS (kind, options)` on `train`.
async fn holdout_auc(job: &Job, name: &str, kind: &str, options: &str) -> f64 {
    let sql = format!(
        "CREATE OR REPLACE MODEL {name} OPTIONS (kind = '{kind}', dim = {}, holdout = 'test', \
         workers = 2{options}) AS SELECT label, idx, val FROM train",
        SPEC.features()
    );
    let epochs = job.execute(&sql).await.unwrap();
    let aucs = column(&epochs[0], "holdout_auc");
    *aucs.last().unwrap()
}

/// On data whose signal is in pairs of features, a factorization machine ends within 0.01 of
/// the AUC of the very probabilities the labels were drawn from (asynchronous, and synchronous
/// with compressed pushes), and logistic regression (no pairs) stays well below it: at least
/// 0.05.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_factorization_machine_learns_the_pairs_logistic_regression_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let (_service, job, generator) = interaction_job(dir.path()).await;
    let training = ", optimizer = 'adagrad', learning_rate = 0.1, epochs = 6, batch_size = 128";
    let fm = holdout_auc(&job, "fm", "fm", &format!("{training}, factors = 4")).await;
    let lr = holdout_auc(&job, "lr", "logistic", training).await;
    // Synchronous workers, SketchML-compressed pushes: the factor rows train as the others.
    let synchronous = format!("{training}, factors = 4, sync = 'bsp', compression = 'sketchml'");
    let fm_bsp = holdout_auc(&job, "fm_bsp", "fm", &synchronous).await;
    eprintln!(
        "holdout AUC: generator {generator:.4}, fm {fm:.4} (bsp, sketchml: {fm_bsp:.4}), \
         logistic {lr:.4}"
    );
    for (run, auc) in [("asp", fm), ("bsp with sketchml", fm_bsp)] {
        assert!(
            (generator - auc).abs() <= 0.01,
            "FM ({run}) {auc} against the generator's {generator}"
        );
    }
    assert!(
        lr < generator - 0.05,
        "logistic {lr}, generator {generator}"
    );

    // Saved and loaded, the model predicts every holdout row as before.
    let out = dir.path().join("fm_model");
    for sql in [
        format!("SAVE MODEL fm TO '{}'", out.display()),
        format!("LOAD MODEL fm_loaded FROM '{}'", out.display()),
    ] {
        job.execute(&sql).await.unwrap();
    }
    let batches = job
        .execute(
            "SELECT max(abs(ps_predict('fm', idx, val) - ps_predict('fm_loaded', idx, val))) \
             AS d FROM test",
        )
        .await
        .unwrap();
    let difference = batches[0].column(0).as_primitive::<Float64Type>().value(0);
    assert_eq!(difference, 0.0);
}
