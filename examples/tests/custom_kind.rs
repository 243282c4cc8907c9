//! A model kind of the program's own (`examples/src/poisson.rs`), added by the recipe alone:
//! registered, then trained, scored, saved and loaded from SQL on real in-process servers,
//! with no change to the SQL crate or the training crate.

use angel_examples::poisson::{self, Poisson};
use angel_ps_service::{Standalone, StandaloneConfig};
use angel_sql::job::Job;
use angel_training::Trains;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::Float64Type;
use datafusion::prelude::SessionContext;

/// Counts whose rate is exactly `exp(0.5 + 0.8 x)` over a grid of x in [-1, 1]: the Poisson
/// likelihood is highest at w = 0.8, b = 0.5, where every row's gradient is zero.
const ROWS: &str = "CREATE TABLE rows AS SELECT exp(0.5 + 0.8 * x) AS label,
      make_array(arrow_cast(0, 'UInt64')) AS idx, make_array(x) AS val
    FROM (SELECT (v % 41) / 20.0 - 1.0 AS x FROM generate_series(1, 2000) AS t(v))";

/// The one value of column `name` of the first row.
fn value(batches: &[RecordBatch], name: &str) -> f64 {
    let column = batches[0].column_by_name(name).unwrap();
    column.as_primitive::<Float64Type>().value(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_of_the_programs_own_trains_predicts_and_loads_from_sql() {
    poisson::register().unwrap();
    let refused = poisson::register().unwrap_err().to_string();
    assert!(
        refused.contains("'poisson' is already registered"),
        "{refused}"
    );

    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let job = Job::new(SessionContext::new(), &service.master_addr());
    job.execute(ROWS).await.unwrap();
    let epochs = job
        .execute(
            "CREATE MODEL counts OPTIONS (kind = 'poisson', dim = 1, optimizer = 'lbfgs', \
             tolerance = 1e-12) AS SELECT label, idx, val FROM rows",
        )
        .await
        .unwrap();
    assert!(epochs[0].num_rows() > 1, "L-BFGS iterated");

    // The closed form: the rate the rows were made from.
    let scored = job
        .execute(
            "SELECT max(abs(ps_predict('counts', idx, val) - exp(0.5 + 0.8 * val[1]))) AS error \
             FROM rows",
        )
        .await
        .unwrap();
    let error = value(&scored, "error");
    assert!(error < 1e-3, "the rate is off by {error}");
    let client = angel_client::PsClient::connect(&service.master_addr())
        .await
        .unwrap();
    let w: Vec<f32> = client.pull_keys("counts", 0, &[0, 1]).await.unwrap();
    assert!(
        (w[0] - 0.8).abs() < 1e-3 && (w[1] - 0.5).abs() < 1e-3,
        "{w:?}"
    );

    // Its loss is the kind's own, as ps_loss and the epoch table report it.
    let loss = job
        .execute("SELECT avg(ps_loss('counts', label, idx, val)) AS loss FROM rows")
        .await
        .unwrap();
    let expected = {
        let rows: Vec<f64> = (1..=2000).map(|v| (v % 41) as f64 / 20.0 - 1.0).collect();
        let mean = |x: &f64| {
            let y = (0.5 + 0.8 * x).exp();
            Poisson
                .gradient()
                .unwrap()
                .loss(y, &[0.5 + 0.8 * x], &mut [0.0])
        };
        rows.iter().map(mean).sum::<f64>() / rows.len() as f64
    };
    assert!((value(&loss, "loss") - expected).abs() < 1e-3, "{expected}");

    // Saved in the default format and loaded back by its name, it predicts the same.
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().display();
    job.execute(&format!("SAVE MODEL counts TO '{at}'"))
        .await
        .unwrap();
    job.execute(&format!("LOAD MODEL again FROM '{at}'"))
        .await
        .unwrap();
    let compared = job
        .execute(
            "SELECT max(abs(ps_predict('counts', idx, val) - ps_predict('again', idx, val))) \
             AS d FROM rows",
        )
        .await
        .unwrap();
    assert_eq!(value(&compared, "d"), 0.0);

    // A negative count is refused, naming the kind's reason.
    job.execute("CREATE TABLE bad AS SELECT -1.0 AS label, make_array(arrow_cast(0, 'UInt64')) AS idx, make_array(0.5) AS val")
        .await
        .unwrap();
    let err = job
        .execute(
            "CREATE MODEL bad OPTIONS (kind = 'poisson', dim = 1) AS SELECT label, idx, val \
             FROM bad",
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("labels are counts"), "{err}");
    service.shutdown().await.unwrap();
}
