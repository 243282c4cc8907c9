//! The example jobs, run end to end against an embedded service on real sockets, held to the
//! quality bars of published logistic-regression results.

use std::path::{Path, PathBuf};

use angel_ps::cli::run::{RunArgs, run_job};
use angel_sql::job::StatementReport;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Float64Type;

/// The shared data sets, beside the project root.
fn data(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data")
        .join(set)
}

async fn run_example(job: &str, vars: &[(&str, String)]) -> Vec<StatementReport> {
    let args = RunArgs {
        file: Path::new(env!("CARGO_MANIFEST_DIR")).join(job),
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        master: None,
        servers: 2,
        partitions: 2,
    };
    run_job(&args, |_| {})
        .await
        .unwrap_or_else(|e| panic!("{job}: {e}"))
}

/// The last epoch's (holdout loss, holdout AUC) from the `CREATE MODEL` statement's table.
fn last_epoch(reports: &[StatementReport]) -> (f64, f64) {
    let model = reports
        .iter()
        .find(|r| r.label.contains("MODEL"))
        .expect("a CREATE MODEL statement");
    let table = &model.output[0];
    let last = table.num_rows() - 1;
    let column = |name: &str| {
        table
            .column_by_name(name)
            .unwrap()
            .as_primitive::<Float64Type>()
            .value(last)
    };
    (column("holdout_loss"), column("holdout_auc"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a9a_logistic_regression_matches_published_quality() {
    let reports = run_example(
        "a9a/job.sql",
        &[("data", data("a9a").display().to_string())],
    )
    .await;
    let (loss, auc) = last_epoch(&reports);
    assert!(auc >= 0.900, "a9a test AUC {auc}");
    assert!(loss <= 0.33, "a9a test log loss {loss}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adult_from_raw_csv_through_the_counter_matches_published_quality() {
    let out = tempfile::tempdir().unwrap();
    let vars = [
        ("data", data("adult").display().to_string()),
        ("out", out.path().display().to_string()),
    ];
    let reports = run_example("adult/job.sql", &vars).await;
    let (loss, auc) = last_epoch(&reports);
    assert!(auc >= 0.905, "Adult holdout AUC {auc}");
    assert!(loss <= 0.32, "Adult holdout log loss {loss}");
    let saved = out.path().join("adult_model");
    assert!(saved.join("weights.parquet").is_file() && saved.join("model.json").is_file());
    let check = reports.last().unwrap();
    assert!(
        check.label.contains("max(abs(ps_predict"),
        "{}",
        check.label
    );
    let difference = check.output[0]
        .column(0)
        .as_primitive::<Float64Type>()
        .value(0);
    assert!(
        difference < 1e-9,
        "the loaded model predicts like the trained one: {difference}"
    );
}
