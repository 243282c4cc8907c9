//! Training from SQL on embedded DataFusion against a real in-process PS: `CREATE MODEL`
//! runs `ps_train` epochs whose optimizer steps happen on the servers.

use std::collections::HashMap;
use std::sync::Arc;

use angel_client::PsClient;
use angel_ps::{Standalone, StandaloneConfig};
use angel_sql::job::Job;
use datafusion::arrow::array::{AsArray, Float64Array, ListArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, UInt64Type};
use datafusion::prelude::{SessionConfig, SessionContext};

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

    let err = job.execute("CREATE MODEL lin OPTIONS (kind = 'linear', dim = 8) AS SELECT label, idx, val FROM rows").await.unwrap_err();
    assert!(err.to_string().contains("'lin' already exists"), "{err}");
    let err = job
        .execute("SELECT ps_predict('nope', idx) FROM rows")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
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
