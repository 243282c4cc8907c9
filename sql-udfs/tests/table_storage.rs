//! Tables a job creates, kept at each storage level (memory, disk, memory-and-disk within a
//! limit): the same rows and the same model from each, files where the level says, none left
//! after the job; and a run drops each table after its last use.

mod common;

use angel_sql::job::Job;
use angel_sql::spilling_table::SpillingTable;
use angel_sql::storage_level::{StorageLevel, TableStorage};
use common::{ctr_job_keeping, empty_job, scalar};
use datafusion::prelude::SessionContext;

/// Tables of the CTR job (click logs through features and the counter).
const TABLES: [&str; 5] = ["logs", "train_features", "test_features", "train", "test"];

/// Rows and feature counts of every table, then the holdout AUC of a model trained on
/// `train` (2 epochs).
async fn summary(job: &Job) -> (Vec<(f64, f64, f64)>, f64) {
    let mut tables = Vec::new();
    for table in TABLES {
        let list = match table {
            "logs" => "1",
            "train" | "test" => "array_length(idx)",
            _ => "array_length(features)",
        };
        let sql = format!("SELECT count(*), sum(label), sum({list}) FROM {table}");
        let out = job.execute(&sql).await.unwrap();
        tables.push((scalar(&out, 0), scalar(&out, 1), scalar(&out, 2)));
    }
    let model = "CREATE OR REPLACE MODEL ctr OPTIONS (kind = 'logistic', counter = 'ctr_features', \
                 optimizer = 'adagrad', learning_rate = 0.05, batch_size = 256, epochs = 2) \
                 AS SELECT label, idx FROM train";
    job.execute(model).await.unwrap();
    let auc = "SELECT ps_auc(label, ps_predict('ctr', idx)) FROM test";
    (tables, scalar(&job.execute(auc).await.unwrap(), 0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_level_keeps_the_same_rows_and_trains_the_same_model() {
    let rows = 20_000;
    let (_service, memory) = ctr_job_keeping(rows, TableStorage::default()).await;
    let (reference, reference_auc) = summary(&memory).await;
    assert!(reference_auc > 0.6, "the model learns: AUC {reference_auc}");
    assert_eq!(reference[0].0, rows as f64);
    // Limit of 4 MB: 2 MB for tables, less than the job's tables (measured below).
    for (level, limit) in [(Some(StorageLevel::Disk), None), (None, Some(4 << 20))] {
        let (_service, job) = ctr_job_keeping(rows, TableStorage::new(level, limit)).await;
        let (tables, auc) = summary(&job).await;
        assert_eq!(tables, reference, "{level:?} {limit:?}");
        assert!(
            (auc - reference_auc).abs() < 0.01,
            "{level:?} {limit:?}: AUC {auc} against {reference_auc} in memory"
        );
        let ctx = job.context().clone();
        let mut files = Vec::new();
        let mut in_memory = 0;
        for name in TABLES {
            let provider = ctx.table_provider(name).await.unwrap();
            let table = provider.downcast_ref::<SpillingTable>().unwrap();
            files.extend(table.files().iter().map(|f| f.to_path_buf()));
            in_memory += table.bytes_in_memory();
        }
        assert!(files.iter().all(|f| f.exists()) && !files.is_empty());
        match limit {
            None => assert_eq!(in_memory, 0, "disk keeps nothing in memory"),
            Some(limit) => assert!(
                in_memory > 0 && in_memory <= limit / 2,
                "memory-and-disk keeps {in_memory} bytes in memory, limit {limit}"
            ),
        }
        drop((ctx, job));
        assert!(
            files.iter().all(|f| !f.exists()),
            "the job's files are removed with it"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_table_is_replaced_only_when_asked() {
    let tables = TableStorage::new(Some(StorageLevel::Disk), None);
    let job = Job::new(SessionContext::new(), "127.0.0.1:1")
        .keeping_tables(tables)
        .unwrap();
    let numbers = "CREATE TABLE t AS SELECT * FROM (VALUES (1), (2), (3)) v(x)";
    job.execute(numbers).await.unwrap();
    let err = job.execute(numbers).await.unwrap_err().to_string();
    assert!(err.contains("table 't' already exists"), "{err}");
    // The new table reads the old one before replacing it.
    let doubled = "CREATE OR REPLACE TABLE t AS SELECT x * 2 AS x FROM t";
    job.execute(doubled).await.unwrap();
    let sum = job.execute("SELECT sum(x) FROM t").await.unwrap();
    assert_eq!(scalar(&sum, 0), 12.0);
}

/// A job that builds two tables from a third through a view, and counts each.
const LAST_USES: &str = "
CREATE TABLE logs AS SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (3, 'c')) AS t(id, c);
CREATE VIEW examples AS SELECT id, c FROM logs;
CREATE TABLE train AS SELECT id FROM examples WHERE id <> 2;
CREATE TABLE test AS SELECT id FROM examples WHERE id = 2;
SELECT count(*) AS n FROM train;
SELECT count(*) AS n FROM test;
";

/// A run drops each table and view it created after the last statement naming it, and
/// nothing else holds the table then (its memory is freed); the answers are those of the
/// statements run one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_drops_each_table_after_its_last_use_and_frees_it() {
    use futures::FutureExt;
    let (_service, job) = empty_job().await;
    let ctx = job.context().clone();
    let names = ["logs", "examples", "train", "test"];
    let mut present = Vec::new();
    let mut logs = None;
    let vars = Default::default();
    let reports = (job.run("lifetimes.sql", LAST_USES, &vars, |_| {
        let exists = names.map(|n| ctx.table_exist(n).unwrap());
        present.push(exists.iter().filter(|e| **e).count());
        if logs.is_none() && exists[0] {
            let provider = ctx.table_provider("logs").now_or_never().unwrap().unwrap();
            logs = Some(std::sync::Arc::downgrade(&provider));
        }
    }))
    .await
    .unwrap();
    // logs; logs and the view; + train; test built and the view and logs dropped; then train
    // and test go after their counts.
    assert_eq!(present, vec![1, 2, 3, 2, 1, 0]);
    assert!(
        logs.unwrap().upgrade().is_none(),
        "nothing holds the dropped logs"
    );
    assert_eq!(scalar(&reports[4].output, 0), 2.0);
    assert_eq!(scalar(&reports[5].output, 0), 1.0);
}
