//! The counter flow from SQL on embedded DataFusion against a real in-process PS:
//! count features, seal, index. The indices must not depend on DataFusion's parallelism.

use std::collections::HashMap;

use angel_ps_service::{Standalone, StandaloneConfig};
use angel_sql::binding::Binding;
use angel_sql::register_all;
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{Int64Type, UInt32Type, UInt64Type};
use datafusion::prelude::{CsvReadOptions, SessionConfig, SessionContext};

const ROWS: usize = 8000;
const MIN_COUNT: i64 = 3;

/// Row i has features a=(i*i % 101) and b=x(i % 997): skewed, with rare values.
fn features(i: usize) -> [String; 2] {
    [format!("a={}", (i * i) % 101), format!("b=x{}", i % 997)]
}

fn write_csv_parts(dir: &std::path::Path) {
    for part in 0..4 {
        let mut csv = String::from("id,a,b\n");
        for i in (part..ROWS).step_by(4) {
            csv.push_str(&format!("{i},{},x{}\n", (i * i) % 101, i % 997));
        }
        std::fs::write(dir.join(format!("part{part}.csv")), csv).unwrap();
    }
}

async fn run(ctx: &SessionContext, sql: &str) -> Vec<datafusion::arrow::record_batch::RecordBatch> {
    ctx.sql(sql).await.unwrap().collect().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_indices_do_not_depend_on_target_partitions() {
    let dir = tempfile::tempdir().unwrap();
    write_csv_parts(dir.path());
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let mut counts: HashMap<String, i64> = HashMap::new();
    for i in 0..ROWS {
        for f in features(i) {
            *counts.entry(f).or_default() += 1;
        }
    }
    let mut runs = Vec::new();
    for partitions in [1, 4] {
        let ctx = SessionContext::new_with_config(
            SessionConfig::new().with_target_partitions(partitions),
        );
        register_all(&ctx, &Binding::remote(&service.master_addr()), None);
        ctx.register_csv("t", dir.path().to_str().unwrap(), CsvReadOptions::new())
            .await
            .unwrap();
        let counter = format!("features_{partitions}");
        let feats = "make_array('a=' || CAST(a AS VARCHAR), 'b=' || b)";

        let counted = run(
            &ctx,
            &format!("SELECT ps_counter_add('{counter}', {feats}) FROM t"),
        )
        .await;
        assert_eq!(
            counted[0].column(0).as_primitive::<Int64Type>().value(0),
            2 * ROWS as i64
        );

        let sealed = run(
            &ctx,
            &format!("SELECT ps_counter_seal('{counter}', {MIN_COUNT})"),
        )
        .await;
        let n = sealed[0].column(0).as_primitive::<UInt64Type>().value(0);
        assert_eq!(
            n,
            counts.values().filter(|&&c| c >= MIN_COUNT).count() as u64
        );

        let indexed = run(
            &ctx,
            &format!("SELECT id, ps_index('{counter}', {feats}) FROM t ORDER BY id"),
        )
        .await;
        let mut rows: Vec<Vec<u64>> = Vec::with_capacity(ROWS);
        for batch in &indexed {
            let lists = batch.column(1).as_list::<i32>();
            for r in 0..batch.num_rows() {
                let list = lists.value(r);
                rows.push(
                    list.as_primitive::<UInt32Type>()
                        .values()
                        .iter()
                        .map(|&i| u64::from(i))
                        .collect(),
                );
            }
        }
        assert_eq!(rows.len(), ROWS);
        for (i, idx) in rows.iter().enumerate() {
            let kept = features(i)
                .iter()
                .filter(|f| counts[*f] >= MIN_COUNT)
                .count();
            assert_eq!(
                idx.len(),
                kept,
                "row {i}: only features counted >= {MIN_COUNT} get an index"
            );
            assert!(idx.iter().all(|&j| j < n));
        }
        runs.push(rows);
    }
    assert_eq!(
        runs[0], runs[1],
        "target_partitions 1 and 4 give the same indices"
    );
    service.shutdown().await.unwrap();
}

/// The error `sql` fails with.
async fn error_of(ctx: &SessionContext, sql: &str) -> String {
    match ctx.sql(sql).await {
        Ok(df) => df.collect().await.expect_err(sql).to_string(),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_state_calls_from_sql_name_the_counter_and_what_it_needs() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let ctx = SessionContext::new();
    register_all(&ctx, &Binding::remote(&service.master_addr()), None);
    run(
        &ctx,
        "SELECT ps_counter_add('c', make_array('a', 'b', 'a'))",
    )
    .await;
    let err = error_of(&ctx, "SELECT ps_index('c', make_array('a'))").await;
    assert!(err.contains("counter 'c' is not sealed yet"), "{err}");
    let sealed = run(&ctx, "SELECT ps_counter_seal('c', 2)").await;
    assert_eq!(sealed[0].column(0).as_primitive::<UInt64Type>().value(0), 1);
    let err = error_of(&ctx, "SELECT ps_counter_add('c', make_array('z'))").await;
    assert!(
        err.contains("counter 'c' is sealed; increase needs the WRITE state"),
        "{err}"
    );
    let err = error_of(&ctx, "SELECT ps_counter_seal('c', 1)").await;
    assert!(err.contains("counter 'c'"), "{err}");
    // CLEAN: the keys go, the dimension is answered, and the dictionary is no longer there.
    let cleaned = run(&ctx, "SELECT ps_counter_clean('c')").await;
    assert_eq!(
        cleaned[0].column(0).as_primitive::<UInt64Type>().value(0),
        1
    );
    let err = error_of(&ctx, "SELECT ps_index('c', make_array('a'))").await;
    assert!(
        err.contains("counter 'c'") && err.contains("clean"),
        "{err}"
    );
    let err = error_of(&ctx, "SELECT ps_counter_clean('c')").await;
    assert!(err.contains("counter 'c'"), "{err}");
    service.shutdown().await.unwrap();
}
