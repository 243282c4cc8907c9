//! The SQL functions as DataFusion sees them: typed signatures whose planning errors name the
//! function and the argument, constants required where the function needs one, and
//! documentation on every function. No parameter server runs: the functions are bound to an
//! address nobody listens on, and every error here comes before any call to it.

use std::sync::Arc;

use angel_sql::binding::Binding;
use angel_sql::{aggregate_functions, register_all, scalar_functions};
use datafusion::arrow::array::{
    Array, AsArray, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{Float64Type, UInt64Type};
use datafusion::prelude::SessionContext;

/// A session with every function registered and a one-row table
/// `t(name, f, idx, label, n)`.
fn session() -> SessionContext {
    let ctx = SessionContext::new();
    register_all(&ctx, &Binding::remote("127.0.0.1:1"), None);
    let idx = ListArray::from_iter_primitive::<UInt64Type, _, _>([Some([Some(1), Some(2)])]);
    let t = RecordBatch::try_from_iter([
        ("name", Arc::new(StringArray::from(vec!["m"])) as _),
        ("f", Arc::new(StringArray::from(vec!["a=1"])) as _),
        ("idx", Arc::new(idx) as _),
        ("label", Arc::new(Float64Array::from(vec![1.0])) as _),
        ("n", Arc::new(Int64Array::from(vec![3])) as _),
    ])
    .unwrap();
    ctx.register_batch("t", t).unwrap();
    ctx
}

/// The error planning `sql` fails with.
async fn planning_error(ctx: &SessionContext, sql: &str) -> String {
    match ctx.sql(sql).await {
        Ok(_) => panic!("{sql}: planned"),
        Err(e) => e.to_string(),
    }
}

/// The first batch `sql` returns.
async fn first_batch(ctx: &SessionContext, sql: &str) -> RecordBatch {
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    batches[0].clone()
}

fn assert_contains(err: &str, expected: &str) {
    assert!(err.contains(expected), "expected {expected:?} in: {err}");
}

#[tokio::test]
async fn wrong_argument_types_and_counts_fail_planning_naming_function_and_argument() {
    let ctx = session();
    for (sql, expected) in [
        (
            "SELECT ps_predict('m', f) FROM t",
            "ps_predict: argument 2 (indices) must be a list of integers, got Utf8",
        ),
        (
            "SELECT ps_predict('m', idx, f) FROM t",
            "ps_predict: argument 3 (values) must be a list of numbers, got Utf8",
        ),
        (
            "SELECT ps_predict('m') FROM t",
            "ps_predict takes 2 or 3 arguments (ps_predict(model, indices[, values]) or \
             ps_predict(model, user, item)), got 1",
        ),
        (
            "SELECT ps_predict('m', n, f) FROM t",
            "ps_predict: argument 3 (item) must be an integer, got Utf8",
        ),
        (
            "SELECT ps_train('m', n, n, f) FROM t",
            "ps_train: argument 4 (rating) must be a number, got Utf8",
        ),
        (
            "SELECT ps_predict(1, idx) FROM t",
            "ps_predict: argument 1 (model) must be a string, got Int64",
        ),
        (
            "SELECT ps_index('c', label) FROM t",
            "ps_index: argument 2 (features) must be a string or a list of strings, got Float64",
        ),
        (
            "SELECT ps_counter_seal('c', 'x')",
            "ps_counter_seal: argument 2 (min_count) must be an integer, got Utf8",
        ),
        (
            "SELECT ps_hash(idx, 10) FROM t",
            "ps_hash: argument 1 (features) must be a string or a list of strings, got List(",
        ),
        (
            "SELECT ps_counter_add('c', n) FROM t",
            "ps_counter_add: argument 2 (features) must be a string or a list of strings, got Int64",
        ),
        (
            "SELECT ps_train('m', f, idx) FROM t",
            "ps_train: argument 2 (label) must be a number, got Utf8",
        ),
        (
            "SELECT ps_train('m', label) FROM t",
            "ps_train takes 3 or 4 arguments",
        ),
        (
            "SELECT ps_logloss(label, f) FROM t",
            "ps_logloss: argument 2 (probability) must be a number, got Utf8",
        ),
        (
            "SELECT ps_auc(f, label) FROM t",
            "ps_auc: argument 1 (label) must be a number, got Utf8",
        ),
    ] {
        assert_contains(&planning_error(&ctx, sql).await, expected);
    }
}

#[tokio::test]
async fn a_column_where_a_constant_is_required_fails_planning() {
    let ctx = session();
    for (sql, expected) in [
        (
            "SELECT ps_predict(name, idx) FROM t",
            "ps_predict: argument 1 (model) must be a constant string, not a column",
        ),
        (
            "SELECT ps_index(name, f) FROM t",
            "ps_index: argument 1 (counter) must be a constant string, not a column",
        ),
        (
            "SELECT ps_counter_seal(name, 2) FROM t",
            "ps_counter_seal: argument 1 (counter) must be a constant string, not a column",
        ),
        (
            "SELECT ps_counter_clean(name) FROM t",
            "ps_counter_clean: argument 1 (counter) must be a constant string, not a column",
        ),
        (
            "SELECT ps_counter_seal('c', n) FROM t",
            "ps_counter_seal: argument 2 (min_count) must be a constant integer, not a column",
        ),
        (
            "SELECT ps_hash(f, n) FROM t",
            "ps_hash: argument 2 (bits) must be a constant integer, not a column",
        ),
        (
            "SELECT ps_hash(f, 0) FROM t",
            "ps_hash: argument 2 (bits) must be between 1 and 63, got 0",
        ),
    ] {
        assert_contains(&planning_error(&ctx, sql).await, expected);
    }
}

/// Aggregates see their arguments as physical expressions when a task creates its
/// accumulator, before any row and any call to the parameter servers: like DataFusion's own
/// aggregates, they check their constants there.
#[tokio::test]
async fn aggregates_want_constant_names_before_reading_rows() {
    let ctx = session();
    for (sql, expected) in [
        (
            "SELECT ps_counter_add(name, f) FROM t",
            "ps_counter_add: argument 1 (counter) must be a constant string, not a column",
        ),
        (
            "SELECT ps_train(name, label, idx) FROM t",
            "ps_train: argument 1 (model) must be a constant string, not a column",
        ),
    ] {
        let err = ctx.sql(sql).await.unwrap().collect().await.unwrap_err();
        assert_contains(&err.to_string(), expected);
    }
}

#[tokio::test]
async fn accepted_types_are_coerced_to_what_the_functions_compute_on() {
    let ctx = session();
    // Plans only: running them would call the parameter servers.
    for sql in [
        "SELECT ps_predict('m', arrow_cast(make_array(1, 2), 'LargeList(Int64)'), make_array(1, 2.5)) FROM t",
        "SELECT ps_predict('m', arrow_cast(make_array(1, 2), 'FixedSizeList(2, Int32)')) FROM t",
        "SELECT ps_index('c', arrow_cast(f, 'Utf8View')), ps_index('c', make_array(f, NULL)) FROM t",
        "SELECT ps_train('m', true, idx), ps_train('m', n, make_array(n), make_array(n)) FROM t",
        "SELECT ps_counter_add('c', f), ps_counter_add('c', make_array(f)) FROM t",
        // A k-means model's point: a list of floats.
        "SELECT ps_train('m', make_array(0.5, n)), ps_distance('m', make_array(1.5)) FROM t",
    ] {
        let plan = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        plan.create_physical_plan()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let h = first_batch(
        &ctx,
        "SELECT ps_hash(arrow_cast(make_array('a', 'b'), 'LargeList(Utf8)'), 4)",
    )
    .await;
    assert_eq!(h.column(0).as_list::<i32>().value(0).len(), 2);
    let metrics = first_batch(
        &ctx,
        "SELECT ps_logloss(n > 0, 0.5), ps_auc(1, label) FROM t",
    )
    .await;
    let logloss = metrics.column(0).as_primitive::<Float64Type>().value(0);
    assert!((logloss - 2f64.ln()).abs() < 1e-12, "{logloss}");
    assert!(metrics.column(1).is_null(0), "one class only: no AUC");
}

#[test]
fn every_function_is_documented() {
    let binding = Binding::default();
    let scalars = scalar_functions(&binding);
    let aggregates = aggregate_functions(&binding);
    let docs = scalars
        .iter()
        .map(|f| (f.name().to_string(), f.documentation()))
        .chain(
            aggregates
                .iter()
                .map(|f| (f.name().to_string(), f.documentation())),
        );
    let mut documented = 0;
    for (name, doc) in docs {
        let doc = doc.unwrap_or_else(|| panic!("{name} has no documentation"));
        assert!(!doc.description.is_empty(), "{name}");
        assert!(doc.syntax_example.starts_with(&name), "{name}");
        assert!(doc.doc_section.label.starts_with("angel-ps"), "{name}");
        documented += 1;
    }
    assert_eq!(documented, 22);
}
