//! `cargo bench -p angel-tests --bench storage`: where angel-ps reads from, measured. Reads the
//! 1M-row CTR click log with the CTR job's `read_csv` options from the local disk (a path),
//! through a `file://` URL and from an S3 server on 127.0.0.1 (s3s, the tests' server), in MB/s
//! and rows/s; then runs the CTR job end to end (`angel-ps run`, model saved and loaded back)
//! with its data and model on local files and on the S3 server. Prints both tables.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use angel_bench::Table;
use angel_etl::bad_rows::BadRows;
use angel_etl::csv::{CsvOptions, read};
use angel_runner::demo::CTR_JOB;
use angel_storage::{Location, stores};
use angel_tests::s3_server::{KEY, S3Server, SECRET};
use angel_tests::{result_value, run_job};
use object_store::aws::AmazonS3Builder;

const ROWS: u64 = 1_000_000;

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let csv = dir.path().join("ctr.csv");
    eprintln!("generating {ROWS} rows of click logs");
    angel_datagen::ctr_data::generate(&csv, ROWS, 7).expect("click logs");
    let bytes = std::fs::metadata(&csv).expect("the log file").len();
    let s3 = S3Server::start(&["data", "models"]);
    s3.put(&csv, "data/ctr.csv");
    connect(&s3);

    let reads = [
        ("local path", csv.display().to_string()),
        ("file:// URL", format!("file://{}", csv.display())),
        ("S3 (s3s on 127.0.0.1)", "s3://data/ctr.csv".to_string()),
    ];
    let mut rows = Vec::new();
    for (name, url) in &reads {
        let (parsed, seconds) = read_once(url);
        eprintln!("{name}: {parsed} rows in {seconds:.2}s");
        rows.push(vec![
            name.to_string(),
            format!("{:.1}", bytes as f64 / seconds / 1e6),
            format!("{:.0}", parsed as f64 / seconds),
            format!("{seconds:.2}"),
        ]);
    }
    let table = Table::new(&["read_csv from", "MB/s", "rows/s", "seconds"], rows);
    println!(
        "read throughput, {ROWS} rows, {:.0} MB:\n{}",
        bytes as f64 / 1e6,
        table.terminal()
    );

    let mut rows = Vec::new();
    for (name, data, out) in [
        (
            "local files",
            csv.display().to_string(),
            dir.path().display().to_string(),
        ),
        (
            "S3 (s3s on 127.0.0.1)",
            "s3://data/ctr.csv".to_string(),
            "s3://models/run".to_string(),
        ),
    ] {
        let (seconds, auc) = job(dir.path(), &s3, &data, &out);
        eprintln!("{name}: {seconds:.1}s, AUC {auc:.4}");
        rows.push(vec![
            name.to_string(),
            format!("{seconds:.1}"),
            format!("{auc:.4}"),
        ]);
    }
    let table = Table::new(
        &["CTR job data and model on", "seconds", "holdout AUC"],
        rows,
    );
    println!(
        "the CTR job end to end (read, features, counter, 5 epochs, SAVE + LOAD MODEL):\n{}",
        table.terminal()
    );
}

/// Points this process's `s3://data` and `s3://models` at `s3`.
fn connect(s3: &S3Server) {
    for bucket in ["data", "models"] {
        let store = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(format!("http://{}", s3.addr))
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id(KEY)
            .with_secret_access_key(SECRET)
            .build()
            .expect("an S3 client");
        let url = Location::parse(&format!("s3://{bucket}/x"))
            .expect("a URL")
            .store;
        stores().insert(&url, Arc::new(store));
    }
}

/// Reads `url` with the CTR job's options; returns rows and seconds.
fn read_once(url: &str) -> (usize, f64) {
    let options: CsvOptions = CTR_JOB
        .split("read_csv('${data}', '")
        .nth(1)
        .and_then(|rest| rest.split("')").next())
        .expect("the CTR job's read_csv options")
        .parse()
        .expect("valid options");
    let started = Instant::now();
    let location = Location::parse(url).expect("a location");
    let batches = read(&[location], &options, &BadRows::default()).expect("the log reads");
    let rows = batches.iter().map(|b| b.num_rows()).sum();
    (rows, started.elapsed().as_secs_f64())
}

/// Runs the CTR job with `data`, saving its model under `out` and loading it back; returns
/// seconds and holdout AUC.
fn job(dir: &Path, s3: &S3Server, data: &str, out: &str) -> (f64, f64) {
    let file = dir.join("job.sql");
    let text = format!(
        "{CTR_JOB}\nSAVE MODEL ctr TO '${{out}}/ctr';\nLOAD MODEL ctr_loaded FROM '${{out}}/ctr';\n"
    );
    std::fs::write(&file, text).expect("the job file");
    let (data, out) = (format!("data={data}"), format!("out={out}"));
    // Built (if stale) before the clock starts.
    angel_tests::binary();
    let started = Instant::now();
    let (_, output) = run_job(
        &[
            file.to_str().expect("a UTF-8 path"),
            "--var",
            &data,
            "--var",
            &out,
        ],
        &s3.env(SECRET),
    );
    let seconds = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (seconds, result_value(&stdout, "holdout_auc"))
}
