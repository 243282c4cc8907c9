//! The user-defined `momentum` optimizer, registered on real in-process servers and selected
//! by name from `CREATE MODEL` on embedded DataFusion.

use angel_client::PsClient;
use angel_examples::momentum::Momentum;
use angel_ps_service::{Functions, Standalone, StandaloneConfig};
use angel_sql::job::Job;
use datafusion::prelude::SessionContext;

/// Rows of an exact linear response `2 a - b + 0.5` over a grid of (a, b) in [-1, 1].
const ROWS: &str = "CREATE TABLE rows AS SELECT 2.0 * a - b + 0.5 AS label,
      make_array(arrow_cast(0, 'UInt64'), arrow_cast(1, 'UInt64')) AS idx,
      make_array(a, b) AS val
    FROM (SELECT (v % 17) / 8.0 - 1.0 AS a, (v % 13) / 6.0 - 1.0 AS b
          FROM generate_series(1, 4000) AS t(v))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_optimizer_trains_from_create_model() {
    let mut functions = Functions::default();
    functions.optimizers.register(Momentum);
    let service = Standalone::start(StandaloneConfig {
        functions,
        ..StandaloneConfig::new(2)
    })
    .await
    .unwrap();
    let job = Job::new(SessionContext::new(), &service.master_addr());
    job.execute(ROWS).await.unwrap();
    job.execute(
        "CREATE MODEL lin OPTIONS (kind = 'linear', dim = 2, optimizer = 'momentum', \
         beta1 = 0.5, learning_rate = 0.02, batch_size = 16, epochs = 5) \
         AS SELECT label, idx, val FROM rows",
    )
    .await
    .unwrap();

    let client = PsClient::connect(&service.master_addr()).await.unwrap();
    let model = client.describe("lin").await.unwrap();
    assert_eq!(model.meta.rows, 2, "weights and momentum's one state row");
    let w: Vec<f32> = client.pull_keys("lin", 0, &[0, 1, 2]).await.unwrap();
    // The closed form: the data are exactly 2 a - b + 0.5.
    for (got, want) in w.iter().zip([2.0, -1.0, 0.5]) {
        assert!((f64::from(*got) - want).abs() < 1e-2, "{w:?}");
    }
    let velocity: Vec<f32> = client.pull_keys("lin", 1, &[0, 1, 2]).await.unwrap();
    assert!(
        velocity.iter().any(|v| *v != 0.0),
        "momentum kept its state"
    );

    let err = job
        .execute(
            "CREATE MODEL m2 OPTIONS (kind = 'linear', dim = 2, optimizer = 'rmsprop') \
             AS SELECT label, idx, val FROM rows",
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("'rmsprop'") && err.contains("momentum"),
        "{err}"
    );
    service.shutdown().await.unwrap();
}

/// A model matrix whose rows do not match its optimizer is refused by the master.
#[tokio::test]
async fn the_master_checks_a_model_matrix_against_its_optimizer() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let client = PsClient::connect(&service.master_addr()).await.unwrap();
    let adam = angel_client::Training::for_optimizer(angel_client::optimizer_params("adam", 0.1));
    let spec = angel_client::MatrixSpec::dense("m", 2, 10).training(adam);
    let err = client.create_matrix(spec).await.unwrap_err().to_string();
    assert!(err.contains("needs 4 rows per output"), "{err}");
    assert_eq!(client.optimizer("adam").await.unwrap().state_rows, 3);
    service.shutdown().await.unwrap();
}

/// An `sgd` that keeps a state row the workers' built-in `sgd` has not.
struct SgdWithAState;

impl angel_ps_service::Optimizer for SgdWithAState {
    fn name(&self) -> &str {
        "sgd"
    }

    fn state_rows(&self) -> usize {
        1
    }

    fn apply(&self, slot: &mut [f64], g: f64, params: &angel_ps_service::optim::OptimizerParams) {
        slot[0] -= params.learning_rate * g;
    }
}

/// Model averaging trains on the workers, with their built-in optimizers: it refuses a user's
/// optimizer when the model is created, and a built-in name the servers replaced with
/// another state layout when it trains, naming both layouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_averaging_refuses_an_optimizer_the_workers_do_not_run() {
    let mut functions = Functions::default();
    functions
        .optimizers
        .register(Momentum)
        .register(SgdWithAState);
    let service = Standalone::start(StandaloneConfig {
        functions,
        ..StandaloneConfig::new(1)
    })
    .await
    .unwrap();
    let job = Job::new(SessionContext::new(), &service.master_addr());
    job.execute(ROWS).await.unwrap();
    let create = |name: &str, optimizer: &str| {
        format!(
            "CREATE MODEL {name} OPTIONS (kind = 'linear', dim = 2, optimizer = '{optimizer}', \
             update = 'average', epochs = 1) AS SELECT label, idx, val FROM rows"
        )
    };
    let err = job.execute(&create("m1", "momentum")).await.unwrap_err();
    let err = err.to_string();
    assert!(
        err.contains("optimizer 'momentum' runs only on the servers"),
        "{err}"
    );
    let err = job.execute(&create("m2", "sgd")).await.unwrap_err();
    let err = err.to_string();
    assert!(
        err.contains("keeps 1 state rows per output") && err.contains("'sgd' keeps 0"),
        "{err}"
    );
    service.shutdown().await.unwrap();
}
