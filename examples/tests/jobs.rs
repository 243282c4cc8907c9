//! The example jobs, run end to end against an embedded service on real sockets, held to the
//! quality bars of published logistic-regression results.

use std::path::{Path, PathBuf};

use angel_ps::cli::run::{RunArgs, run_job};
use angel_sql::job::StatementReport;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, Float64Type, UInt64Type};

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
        ballista: None,
        stage: None,
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

/// The first value of the first statement whose SQL contains `marker`, as an integer.
fn value(reports: &[StatementReport], marker: &str) -> u64 {
    let report = reports
        .iter()
        .find(|r| r.sql.contains(marker))
        .expect(marker);
    let column =
        datafusion::arrow::compute::cast(report.output[0].column(0), &DataType::UInt64).unwrap();
    column.as_primitive::<UInt64Type>().value(0)
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
    let dim = value(&reports, "ps_counter_seal");
    assert_eq!(
        value(&reports, "FROM saved_weights"),
        dim,
        "the saved dictionary holds every feature"
    );
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

/// A saved model loads into a fresh service: the counter is rebuilt from the saved dictionary
/// and gives every feature its saved index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_model_loads_into_a_fresh_service_with_its_feature_indices() {
    let out = tempfile::tempdir().unwrap();
    let vars = [
        ("data", data("adult").display().to_string()),
        ("out", out.path().display().to_string()),
    ];
    run_example("adult/job.sql", &vars).await;
    let job = out.path().join("load.sql");
    std::fs::write(
        &job,
        "LOAD MODEL adult FROM '${out}/adult_model';
         CREATE EXTERNAL TABLE saved STORED AS PARQUET LOCATION '${out}/adult_model/weights.parquet';
         SELECT count(*) AS checked,
                sum(CASE WHEN ps_index('adult_features', make_array(feature))[1] = \"index\" THEN 0 ELSE 1 END) AS mismatched,
                max(abs(ps_predict('adult', make_array(\"index\")) - 1.0 / (1.0 + exp(-(CAST(weight AS DOUBLE) + b.w))))) AS max_difference
         FROM saved, (SELECT CAST(weight AS DOUBLE) AS w FROM saved WHERE feature IS NULL) AS b
         WHERE feature IS NOT NULL",
    )
    .unwrap();
    let args = RunArgs {
        file: job,
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        master: None,
        servers: 3,
        partitions: 2,
        ballista: None,
        stage: None,
    };
    let reports = run_job(&args, |_| {}).await.unwrap();
    let result = &reports.last().unwrap().output[0];
    let int = |c: usize| {
        datafusion::arrow::compute::cast(result.column(c), &DataType::UInt64)
            .unwrap()
            .as_primitive::<UInt64Type>()
            .value(0)
    };
    assert!(int(0) > 100, "features checked: {}", int(0));
    assert_eq!(
        int(1),
        0,
        "features whose rebuilt index differs from the saved one"
    );
    let difference = result.column(2).as_primitive::<Float64Type>().value(0);
    assert!(
        difference < 1e-6,
        "predictions from the loaded weights: {difference}"
    );
}
