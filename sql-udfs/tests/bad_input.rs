//! Careless input to SQL jobs, against a real in-process service: every case ends (each is
//! bounded by a timeout, so a hang fails instead of stalling the suite) with an error naming
//! the problem, or with a correct result — never a spin, never a silent wrong answer.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use angel_client::PsClient;
use angel_ps_service::{Standalone, StandaloneConfig};
use angel_sql::job::{Job, StatementReport};
use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Float64Type;
use datafusion::prelude::SessionContext;

/// Longer than any case needs; a case that hangs fails here.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs `text` as a job file on a fresh session: the statements' reports, or the job's error
/// message.
async fn run(master: &str, text: &str) -> Result<Vec<StatementReport>, String> {
    let job = Job::new(SessionContext::new(), master);
    let vars = HashMap::new();
    let ran = job.run("case.sql", text, &vars, |_| {});
    match tokio::time::timeout(LIMIT, ran).await {
        Err(_) => panic!("the job did not finish within {LIMIT:?}:\n{text}"),
        Ok(result) => result.map_err(|e| e.to_string()),
    }
}

/// Runs `text` and checks it fails with a message holding every one of `expected`.
async fn fails(master: &str, text: &str, expected: &[&str]) {
    match run(master, text).await {
        Ok(_) => panic!("accepted, expected an error with {expected:?}:\n{text}"),
        Err(message) => {
            for e in expected {
                assert!(message.contains(e), "'{e}' not in: {message}\nfor:\n{text}");
            }
        }
    }
}

/// Writes `text` to `name` in `dir` and returns the path as SQL sees it.
fn file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nan_and_infinity_end_with_errors_not_hangs() {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let m = service.master_addr();
    let dir = tempfile::tempdir().unwrap();
    // Item 1: NaN scores used to spin the AUC's tie loop forever.
    fails(
        &m,
        "SELECT ps_auc(l, s) FROM (VALUES (1.0, 'NaN'::double), (0.0, 0.5)) t(l, s);",
        &["ps_auc", "score is NaN"],
    )
    .await;
    fails(
        &m,
        "SELECT ps_logloss(l, s) FROM (VALUES ('NaN'::double, 0.2), (0.0, 0.5)) t(l, s);",
        &["ps_logloss", "label is NaN"],
    )
    .await;
    // Item 2: NaN and infinite values in a libsvm file are bad rows, named by line.
    let data = file(
        dir.path(),
        "nan.libsvm",
        "1 1:1 2:nan\n0 2:1 3:1\n1 1:1 3:1\n0 2:1 4:inf\n",
    );
    let train = format!(
        "CREATE TABLE t AS SELECT * FROM read_libsvm('{data}');\n\
         CREATE MODEL m OPTIONS (dim = 5, epochs = 2, holdout = 't') AS SELECT label, idx, val FROM t;"
    );
    fails(
        &m,
        &train,
        &["nan.libsvm:1", "'nan' of index 2 is not a finite number"],
    )
    .await;
    // Skipped, the rest trains and the holdout AUC is a number.
    let reports = run(&m, &train.replace("');", "', 'bad_rows=skip');"))
        .await
        .unwrap();
    let epochs = reports[1].epoch_table().expect("an epoch table");
    let auc = epochs.column(4).as_primitive::<Float64Type>().value(1);
    assert!((0.0..=1.0).contains(&auc), "holdout AUC {auc}");
    // A NaN learning rate never reaches the servers.
    fails(
        &m,
        &train
            .replace("');", "', 'bad_rows=skip');")
            .replace("epochs = 2", "epochs = 2, learning_rate = 'NaN'"),
        &["learning_rate = 'NaN' is not allowed", "above 0"],
    )
    .await;
    // Item 10: NaN labels and values from SQL are refused, naming the row.
    let rows = "CREATE TABLE r AS SELECT * FROM (VALUES \
                (1.0, [0, 1], [1.0, 2.0]), ('NaN'::double, [1], [1.0])) t(label, idx, val);";
    fails(
        &m,
        &format!("{rows}\nCREATE MODEL n OPTIONS (dim = 4) AS SELECT label, idx, val FROM r;"),
        &["ps_train", "label is NaN"],
    )
    .await;
    let rows = rows.replace("'NaN'::double, [1], [1.0]", "0.0, [1], ['inf'::double]");
    fails(
        &m,
        &format!("{rows}\nCREATE MODEL v OPTIONS (dim = 4) AS SELECT label, idx, val FROM r;"),
        &["ps_train", "value of index 1", "inf", "finite"],
    )
    .await;
}

/// Training that diverges fails its statement, naming the model, the epoch and the figure,
/// unless `on_divergence = 'continue'`; a diverged model is never saved (LOAD MODEL would
/// refuse the file), and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diverging_training_fails_naming_the_epoch_and_saves_nothing() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let m = service.master_addr();
    let rows = "CREATE TABLE r AS SELECT (value % 3)::double AS label, \
                [value % 4, 4 + value % 3] AS idx, [1.0, 2.0] AS val FROM range(300);";
    let model = |name: &str, more: &str| {
        format!(
            "{rows}\nCREATE MODEL {name} OPTIONS (kind = 'linear', dim = 8, epochs = 3, \
             optimizer = 'sgd', learning_rate = 1e30{more}) AS SELECT label, idx, val FROM r;"
        )
    };
    let expected = [
        "model 'd' diverged: epoch ",
        "'s train_loss is ",
        "on_divergence",
    ];
    fails(&m, &model("d", ""), &expected).await;
    fails(
        &m,
        &model("e", ", on_divergence = 'sometimes'"),
        &["'fail' or 'continue'"],
    )
    .await;
    let out = tempfile::tempdir().unwrap();
    let save = format!(
        "{}\nSAVE MODEL c TO '{}';",
        model("c", ", on_divergence = 'continue'"),
        out.path().display()
    );
    fails(&m, &save, &["model 'c' cannot be saved", "diverged"]).await;
    let written = std::fs::read_dir(out.path()).unwrap().count();
    assert_eq!(
        written, 0,
        "nothing written for a model LOAD MODEL would refuse"
    );
}

/// A `CREATE MODEL` that fails after it created its matrices (here: at its first holdout
/// scoring) drops them, the model and its kind's companions (a boosted model's sketch, cuts,
/// histograms and totals; a topic model's tokens), so the same statement runs again without
/// `OR REPLACE` (round 4, finding 11).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_create_model_leaves_nothing_and_runs_again() {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let m = service.master_addr();
    let client = PsClient::connect(&m).await.unwrap();
    let tables = "CREATE TABLE r AS SELECT (value % 2)::double AS label, \
                  [value % 4, 4 + value % 3] AS idx, [1.0, 2.0] AS val FROM range(200);\n\
                  CREATE TABLE h AS SELECT 1.0 AS label;\n";
    let rows = "SELECT label, idx, val FROM r";
    let words = "SELECT value AS doc, [value % 4, 4 + value % 3] AS words FROM range(50)";
    for (model, options, query) in [
        ("g", "kind = 'gbdt', dim = 8, trees = 2, depth = 2", rows),
        ("t", "kind = 'lda', dim = 8, topics = 2", words),
        ("l", "kind = 'logistic', dim = 8", rows),
    ] {
        let statement = |more: &str| {
            format!("{tables}CREATE MODEL {model} OPTIONS ({options}{more}) AS {query};")
        };
        fails(&m, &statement(", holdout = 'h'"), &["holdout table 'h'"]).await;
        let status = client.status().await.unwrap();
        let left: Vec<String> = (status.map.unwrap().matrices.into_iter())
            .map(|meta| meta.name)
            .filter(|name| name == model || name.starts_with(&format!("{model}.")))
            .collect();
        assert!(
            left.is_empty(),
            "{model}: the failed statement left {left:?}"
        );
        run(&m, &statement(""))
            .await
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        assert!(client.matrix(model).await.is_ok(), "{model} trained");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indices_must_lie_inside_the_model() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let m = service.master_addr();
    let model = "CREATE TABLE r AS SELECT * FROM (VALUES (1.0, [0, 4]), (0.0, [1, 2])) t(y, idx);\n\
                 CREATE MODEL five OPTIONS (dim = 5, epochs = 1) AS SELECT y, idx FROM r;\n";
    run(&m, model).await.unwrap();
    // Item 8: index 5 of a dim-5 model is the intercept's column.
    fails(
        &m,
        "SELECT ps_predict('five', [5]);",
        &["ps_predict", "index 5", "outside model 'five'", "0 to 4"],
    )
    .await;
    fails(
        &m,
        "SELECT ps_predict('five', [1, NULL]);",
        &["indices of row 0 of the batch hold a NULL"],
    )
    .await;
    fails(
        &m,
        "SELECT ps_predict('five', [-1, 2]);",
        &["ps_predict", "not a whole number from 0"],
    )
    .await;
    fails(
        &m,
        &model.replace("dim = 5", "dim = 4").replace("five", "four"),
        &["ps_train", "index 4", "outside model 'four'"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_out_of_range_are_named() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let m = service.master_addr();
    let table = "CREATE TABLE r AS SELECT * FROM (VALUES (1.0, [0]), (0.0, [1])) t(y, idx);\n";
    let model = |options: &str| {
        format!("{table}CREATE MODEL x OPTIONS ({options}) AS SELECT y, idx FROM r;")
    };
    for (options, expected) in [
        ("dim = 2, batch_size = 0", "batch_size = '0' is not allowed"),
        (
            "dim = 2, batch_size = -3",
            "batch_size = '-3' is not allowed",
        ),
        (
            "dim = 2, learning_rate = 0",
            "learning_rate = '0' is not allowed",
        ),
        (
            "dim = 2, learning_rate = -1",
            "learning_rate = '-1' is not allowed",
        ),
        ("dim = 2, l2 = -0.5", "l2 = '-0.5' is not allowed"),
        ("dim = 0", "dim = '0' is not allowed"),
        (
            "dim = 2, counter = 'nosuch'",
            "counter = 'nosuch': no counter",
        ),
        ("dim = 2, holdout = 'nosuch'", "holdout = 'nosuch'"),
        (
            "dim = 2, kind = 'svm', optimizer = 'lbfgs'",
            "not a svm model",
        ),
        (
            "dim = 2, optimizer = 'lbfgs', l1 = 0.1",
            "use optimizer = 'owlqn'",
        ),
        ("dim = 2, memory = 5", "not optimizer 'adam''s"),
        (
            "dim = 100000000, kind = 'fm'",
            "model 'x': a fm model's factors start at random",
        ),
        (
            "dim = 2, learning_rate = 0.1, lr = 0.2",
            "options 'learning_rate' and 'lr' both set learning_rate",
        ),
        (
            "dim = 2, kind = 'gbdt', optimizer = 'adam'",
            "'optimizer' does not apply to a gbdt model",
        ),
        (
            "dim = 2, kind = 'lda', topics = 2, l2 = 0.1",
            "'l2' does not apply to a lda model",
        ),
        ("dim = 2, optimizer = 'lbfgs', memory = 0", "memory = '0'"),
        (
            "dim = 1073741824, kind = 'kmeans', k = 2",
            "past the 134217728 (1 GiB of doubles) a worker keeps dense",
        ),
        (
            "dim = 2, kind = 'kmeans', k = 2, algorithm = 'elkan'",
            "algorithm = 'elkan' is not allowed",
        ),
        (
            "dim = 2, kind = 'kmeans', k = 2, tolerance = 1",
            "tolerance = '1' is not allowed: it must be in [0, 1)",
        ),
    ] {
        fails(&m, &model(options), &["case.sql:2", expected]).await;
    }
    // A topic model's holdout without the words column (round 4, finding 14).
    fails(
        &m,
        "CREATE TABLE h AS SELECT 1 AS doc;\nCREATE MODEL lda OPTIONS (kind = 'lda', topics = 2, \
         dim = 4, holdout = 'h') AS SELECT 1 AS doc, [0, 1] AS words;",
        &["case.sql:2", "holdout table 'h'", "\"words\""],
    )
    .await;
    fails(
        &m,
        "CREATE MODEL e OPTIONS (dim = 2) AS SELECT 1.0 AS y, [0] AS idx WHERE false;",
        &["training query returned no rows"],
    )
    .await;
    fails(
        &m,
        &format!("{table}CREATE MODEL s OPTIONS (dim = 2) AS SELECT 'yes', idx FROM r;"),
        &["argument 2 (label) must be a number, got Utf8"],
    )
    .await;
    run(&m, &model("dim = 2")).await.unwrap();
    fails(
        &m,
        "SELECT ps_predict('x', [1.5, 2.0]);",
        &["argument 2 (indices) must be a list of integers"],
    )
    .await;
    fails(&m, "SAVE MODEL x TO '';", &["the directory is empty"]).await;
    // Counters: a negative min_count; a min_count above every count says so, not "not sealed".
    let counted = "SELECT ps_counter_add('c', f) FROM (VALUES ('a'), ('b')) t(f);\n";
    fails(
        &m,
        &format!("{counted}SELECT ps_counter_seal('c', -1);"),
        &["min_count must be 1 or more, got -1"],
    )
    .await;
    run(&m, "SELECT ps_counter_seal('c', 5);").await.unwrap();
    fails(
        &m,
        &model("counter = 'c'"),
        &["counter = 'c'", "indexed no key", "min_count = 5"],
    )
    .await;
    fails(
        &m,
        "SELECT ps_counter_seal('c', 1);",
        &["counter 'c' is sealed", "still counting"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_files_report_where_in_the_file() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let m = service.master_addr();
    // A `;` in a block comment splits nothing; parser positions count in the file.
    let text = "SELECT 1 /* one; two */ + 1;\n\n\nSELECT 1 +\n);";
    fails(&m, text, &["case.sql:4", "Line: 5"]).await;
}

/// Trains a 5-feature model on the service at `m` and saves it to each of `dirs` (below
/// `out`).
async fn save_five(m: &str, out: &Path, dirs: &[&str]) {
    let saves: Vec<String> = dirs
        .iter()
        .map(|d| format!("SAVE MODEL five TO '{}';", out.join(d).display()))
        .collect();
    run(
        m,
        &format!(
            "CREATE TABLE r AS SELECT * FROM (VALUES (1.0, [0, 4]), (0.0, [1, 2])) t(y, idx);\n\
             CREATE MODEL five OPTIONS (dim = 5, epochs = 1) AS SELECT y, idx FROM r;\n{}",
            saves.join("\n")
        ),
    )
    .await
    .unwrap();
}

/// The `model.json` at `path`, parsed.
fn model_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_model_must_agree_on_its_dimension() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let m = service.master_addr();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display();
    save_five(&m, dir.path(), &["kept", "edited"]).await;
    // Item 9: model.json edited to say dim 1000, options included.
    let path = dir.path().join("edited/v000001/model.json");
    let mut json = model_json(&path);
    json["dim"] = 1000.into();
    json["options"]["dim"] = "1000".into();
    std::fs::write(&path, json.to_string()).unwrap();
    fails(
        &m,
        &format!("LOAD MODEL wrong FROM '{out}/edited';"),
        &["model.json says dim 1000", "intercept at index 5"],
    )
    .await;
    run(&m, &format!("LOAD MODEL right FROM '{out}/kept';"))
        .await
        .unwrap();
}

/// Writes a `weights.parquet` of (feature as Utf8View, as DataFusion's COPY writes it, index,
/// weight) rows over the one at `path`.
fn write_weights(path: &Path, rows: &[(Option<&str>, Option<u64>, Option<f32>)]) {
    use datafusion::arrow::array::{Float32Array, RecordBatch, StringViewArray, UInt64Array};
    use std::sync::Arc;
    let features: StringViewArray = rows.iter().map(|r| r.0).collect();
    let indices: UInt64Array = rows.iter().map(|r| r.1).collect();
    let weights: Float32Array = rows.iter().map(|r| r.2).collect();
    let batch = RecordBatch::try_from_iter([
        ("feature", Arc::new(features) as _),
        ("index", Arc::new(indices) as _),
        ("weight", Arc::new(weights) as _),
    ])
    .unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer =
        datafusion::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_model_with_bad_weights_is_refused_naming_the_row() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let m = service.master_addr();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display();
    save_five(&m, dir.path(), &["m"]).await;
    let weights = dir.path().join("m/v000001/weights.parquet");
    let load = |name: &str| format!("LOAD MODEL {name} FROM '{out}/m';");
    let cases: [(&[_], &[&str]); 3] = [
        (
            &[
                (None, Some(0), Some(0.5)),
                (None, Some(1), Some(f32::NAN)),
                (None, Some(5), Some(0.1)),
            ],
            &["weights.parquet: row 2: the weight of index 1 is NaN"],
        ),
        (
            &[
                (None, Some(0), Some(0.5)),
                (None, Some(1), None),
                (None, Some(5), Some(0.1)),
            ],
            &["row 2: the index or the weight is NULL"],
        ),
        (
            &[
                (None, Some(1), Some(0.5)),
                (Some("a"), Some(1), Some(0.2)),
                (None, Some(5), Some(0.1)),
            ],
            &["row 2: index 1 is given a second time"],
        ),
    ];
    for (i, (rows, expected)) in cases.iter().enumerate() {
        write_weights(&weights, rows);
        fails(&m, &load(&format!("bad{i}")), expected).await;
    }
    // Files are capped by what they can hold (round 4, finding 4): 80 MB of zeros compressed
    // into weights.parquet (a dim-5 model's may hold 64 MiB and 384 bytes), and a model.json
    // or _CURRENT past their own caps, are refused before they are read whole.
    let mut bomb = zstd::Encoder::new(Vec::new(), 1).unwrap();
    for _ in 0..80 {
        std::io::Write::write_all(&mut bomb, &[0u8; 1 << 20]).unwrap();
    }
    std::fs::write(&weights, bomb.finish().unwrap()).unwrap();
    fails(
        &m,
        &load("bomb"),
        &["weights.parquet", "more than the 67109248 bytes"],
    )
    .await;
    let padded = dir.path().join("padded");
    let save = format!("SAVE MODEL five TO '{}';", padded.display());
    run(&m, &save).await.unwrap();
    let json = padded.join("v000001/model.json");
    std::fs::write(&json, " ".repeat(17 << 20)).unwrap();
    let load_padded = format!("LOAD MODEL padded FROM '{}';", padded.display());
    fails(
        &m,
        &load_padded,
        &["model.json", "more than the 16777216 bytes"],
    )
    .await;
    std::fs::write(padded.join("_CURRENT"), "v".repeat(5000)).unwrap();
    fails(&m, &load_padded, &["_CURRENT", "more than the 4096 bytes"]).await;
    // Utf8View features load, and a model.json listing the training option `epochs` too.
    write_weights(
        &weights,
        &[(None, Some(0), Some(0.5)), (None, Some(5), Some(0.1))],
    );
    let json_path = dir.path().join("m/v000001/model.json");
    let mut json = model_json(&json_path);
    json["options"]["epochs"] = "3".into();
    std::fs::write(&json_path, json.to_string()).unwrap();
    run(&m, &load("good")).await.unwrap();
    // A truncated file names itself.
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    fails(&m, &load("cut"), &["weights.parquet"]).await;
}
