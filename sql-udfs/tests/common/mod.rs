//! What the consistency and rotation tests share: sessions over the a9a split, generated
//! click logs or synthetic ratings, on a real in-process service; the epoch table's columns;
//! the record of rotation leases.

// Each test binary uses part of these helpers.
#![allow(dead_code)]

use angel_client::PsClient;
use angel_datagen::ratings_data::RatingsSpec;
use angel_proto::{Lease, StatusRequest};
use angel_ps_service::{Standalone, StandaloneConfig};
use angel_sql::job::Job;
use angel_sql::job::script;
use angel_sql::storage_level::TableStorage;
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::Float64Type;
use datafusion::prelude::{SessionConfig, SessionContext};

/// A job of 2 workers and small record batches (so round-robin spreads them evenly over
/// workers) with a service of two servers.
pub async fn empty_job() -> (Standalone, Job) {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .with_batch_size(512);
    let job = Job::new(
        SessionContext::new_with_config(config),
        &service.master_addr(),
    );
    (service, job)
}

/// a9a's train and test splits as tables `train` and `test` (small record batches, so
/// round-robin spreads them evenly over workers), with a service of two servers.
pub async fn a9a_job() -> (Standalone, Job) {
    let (service, job) = empty_job().await;
    for (table, file) in [("train", "a9a_train"), ("test", "a9a_test")] {
        let sql = format!(
            "CREATE TABLE {table} AS SELECT label, idx, val FROM \
             read_libsvm('../examples/data/a9a/{file}.libsvm.gz')"
        );
        job.execute(&sql).await.unwrap();
    }
    (service, job)
}

/// `rows` generated click logs through the CTR example's features and counter, as tables
/// `train` (label, idx) and `test`, with a service of two servers.
pub async fn ctr_job(rows: u64) -> (Standalone, Job) {
    ctr_job_keeping(rows, TableStorage::default()).await
}

/// [`ctr_job`] with its tables kept in `tables`.
pub async fn ctr_job_keeping(rows: u64, tables: TableStorage) -> (Standalone, Job) {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let config = SessionConfig::new().with_target_partitions(2);
    let job = Job::new(
        SessionContext::new_with_config(config),
        &service.master_addr(),
    )
    .keeping_tables(tables)
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("ctr.csv");
    angel_datagen::ctr_data::generate(&logs, rows, 3).unwrap();
    let text = std::fs::read_to_string("../examples/ctr/job.sql").unwrap();
    let prepare = &text[..text.find("CREATE OR REPLACE MODEL").unwrap()];
    let vars = [("data".to_string(), logs.display().to_string())].into();
    // Statement by statement, so the tables stay for the tests (a run drops each after its
    // last use in the job).
    let prepare = script::substitute(prepare, &vars).unwrap();
    for (_, sql) in script::statements(&prepare) {
        job.execute(&sql).await.unwrap();
    }
    (service, job)
}

/// Synthetic ratings of `spec` (`angel_datagen::ratings_data`, seed 7) as tables `train` and
/// `test` (`user, item, rating`), read in `partitions` partitions, with a service of two
/// servers.
pub async fn synthetic_ratings_job(spec: &RatingsSpec, partitions: usize) -> (Standalone, Job) {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let config = SessionConfig::new().with_target_partitions(partitions);
    let job = Job::new(
        SessionContext::new_with_config(config),
        &service.master_addr(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train.csv"), dir.path().join("test.csv"));
    angel_datagen::ratings_data::generate(&train, &test, spec, 7).unwrap();
    for (table, file) in [("train", &train), ("test", &test)] {
        let sql = format!(
            "CREATE TABLE {table} AS SELECT * FROM read_csv('{}')",
            file.display()
        );
        job.execute(&sql).await.unwrap();
    }
    (service, job)
}

/// The leases of model rotation the service at `master` recorded.
pub async fn leases(master: &str) -> Vec<Lease> {
    let client = PsClient::connect(master).await.unwrap();
    let request = StatusRequest {
        leases: true,
        ..Default::default()
    };
    client.status_with(request).await.unwrap().leases
}

/// Column `name` of the epoch table, as numbers.
pub fn column(epochs: &RecordBatch, name: &str) -> Vec<f64> {
    let i = epochs.schema().index_of(name).unwrap();
    match epochs.column(i).as_primitive_opt::<Float64Type>() {
        Some(a) => a.values().to_vec(),
        None => epochs
            .column(i)
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
            .values()
            .iter()
            .map(|&x| x as f64)
            .collect(),
    }
}

/// Column `name` of the epoch table, as text.
pub fn text(epochs: &RecordBatch, name: &str) -> Vec<String> {
    let i = epochs.schema().index_of(name).unwrap();
    epochs
        .column(i)
        .as_string::<i32>()
        .iter()
        .map(|s| s.unwrap_or_default().to_string())
        .collect()
}

/// Value `col` of the first row of `batches`, as a number.
pub fn scalar(batches: &[RecordBatch], col: usize) -> f64 {
    let column = datafusion::arrow::compute::cast(
        batches[0].column(col),
        &datafusion::arrow::datatypes::DataType::Float64,
    )
    .unwrap();
    column.as_primitive::<Float64Type>().value(0)
}
