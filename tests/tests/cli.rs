//! The `angel-ps` command: help texts, `status`, `demo`, `run` errors, and clean shutdown on
//! SIGTERM.

use std::process::Command;
use std::time::Duration;

use angel_client::{ClockPhase, ClockRequest, MatrixSpec, WorkerClock};
use angel_tests::{Cluster, binary, spawn, stdout_of};

#[test]
fn every_subcommand_documents_its_flags() {
    for (sub, flags) in [
        (
            "master",
            &[
                "--bind",
                "--parts-per-server",
                "--http",
                "--namespace-max-objects",
                "--namespace-memory",
            ][..],
        ),
        (
            "server",
            &[
                "--master",
                "--bind",
                "--advertise",
                "--max-message-bytes",
                "--request-timeout-secs",
                "--memory-budget",
                "--heartbeat-ms",
                "--http",
            ],
        ),
        (
            "standalone",
            &[
                "--servers",
                "--bind",
                "--max-message-bytes",
                "--request-timeout-secs",
                "--memory-budget",
                "--http",
            ],
        ),
        ("status", &["--master", "--pulls", "--leases"]),
        ("drop", &["--master", "<NAMESPACE>"]),
        (
            "demo",
            &[
                "--rows",
                "--seed",
                "--data",
                "--epochs",
                "--servers",
                "--memory-limit",
                "--storage-level",
                "--http",
            ],
        ),
        (
            "run",
            &[
                "--var",
                "--master",
                "--servers",
                "--partitions",
                "--memory-limit",
                "--storage-level",
            ],
        ),
        ("bench", &["ps", "e2e", "sync", "scale", "chaos", "gbdt"]),
    ] {
        let out = Command::new(binary())
            .args([sub, "--help"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{sub} --help failed");
        let text = String::from_utf8(out.stdout).unwrap();
        for flag in flags {
            assert!(
                text.contains(flag),
                "`{sub} --help` should describe {flag}:\n{text}"
            );
        }
    }
}

#[tokio::test]
async fn status_lists_servers_and_matrices() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("model", 1, 1 << 40))
        .await
        .unwrap();
    c.push_keys("model", 0, &[1, 2, 3], &[1.0f32; 3])
        .await
        .unwrap();
    let out = Command::new(binary())
        .args(["status", "--master", &cluster.master.addr])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for s in &cluster.servers {
        assert!(
            text.contains(&s.addr),
            "status should list server {}:\n{text}",
            s.addr
        );
    }
    assert!(
        text.contains("model") && text.contains("Sparse") && text.contains("1 x 1099511627776"),
        "{text}"
    );

    // The same as JSON lines: one per table, rows keyed by the column headers.
    let out = Command::new(binary())
        .args([
            "status",
            "--output",
            "json",
            "--master",
            &cluster.master.addr,
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = angel_tests::json_lines(&text);
    let rows = |name: &str| {
        let table = lines
            .iter()
            .find(|l| l["kind"] == "table" && l["table"] == name);
        let rows = table.and_then(|t| t["rows"].as_array()).cloned();
        rows.unwrap_or_else(|| panic!("no table {name} in:\n{text}"))
    };
    let mut addresses: Vec<&str> = cluster.servers.iter().map(|s| s.addr.as_str()).collect();
    addresses.sort();
    let servers = rows("servers");
    let mut listed: Vec<&str> = servers
        .iter()
        .filter_map(|s| s["address"].as_str())
        .collect();
    listed.sort();
    assert_eq!(listed, addresses, "{text}");
    let matrices = rows("matrices");
    let model = matrices.iter().find(|m| m["matrix"] == "model");
    let model = model.unwrap_or_else(|| panic!("no matrix 'model' in:\n{text}"));
    assert_eq!(model["shape"], "1 x 1099511627776");
    assert_eq!(model["elements"].as_i64(), Some(3), "{model}");
    let notes: Vec<&str> = lines
        .iter()
        .filter(|l| l["kind"] == "note")
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("partition map epoch")),
        "{text}"
    );
    assert!(
        notes.iter().any(|n| n.starts_with("snapshots: off")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_training_workers_and_how_far_ahead_they_pulled() {
    let cluster = Cluster::start(1);
    let c = cluster.client().await;
    let trained = angel_client::Training::for_optimizer(angel_client::optimizer_params("sgd", 0.1));
    c.create_matrix(MatrixSpec::dense("m", 1, 8).training(trained))
        .await
        .unwrap();
    // Worker 7 pulls at clock 2 once worker 8 completed (at most) 1 step: a lead of 1.
    for (worker, clock) in [(7, 0), (8, 0), (7, 2), (8, 1)] {
        let step = Some(WorkerClock { worker, clock });
        c.pull_at::<f32>("m", &[0], &[1], step).await.unwrap();
    }
    let report = ClockRequest {
        model: "m".into(),
        worker: 7,
        clock: 3,
        phase: ClockPhase::Pull as i32,
        ..Default::default()
    };
    assert!(c.clock(report).await.unwrap().ready);
    let out = Command::new(binary())
        .args(["status", "--pulls", "--master", &cluster.master.addr])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let pulls = &text[text.find("training pulls").expect("a pulls table")..];
    let row: Vec<&str> = pulls
        .lines()
        .find(|l| l.contains(" m "))
        .expect("a row for model m")
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(
        row[2..],
        ["4", "1"],
        "pulls recorded, largest lead: {pulls}"
    );
    assert!(text.contains("training workers"), "{text}");
}

#[test]
fn status_of_a_missing_master_fails_with_a_clear_error() {
    let out = Command::new(binary())
        .args(["status", "--master", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("master 127.0.0.1:1 is unreachable"), "{err}");
}

#[tokio::test]
async fn standalone_serves_and_stops_cleanly_on_sigterm() {
    let mut node = spawn(&["standalone", "--servers", "2", "--bind", "127.0.0.1:0"]);
    let client = angel_client::PsClient::connect(&node.addr).await.unwrap();
    client
        .create_matrix(MatrixSpec::dense("x", 1, 10))
        .await
        .unwrap();
    assert_eq!(client.status().await.unwrap().servers.len(), 2);
    assert_eq!(
        node.terminate(Duration::from_secs(10)),
        Some(0),
        "exit code 0 on SIGTERM"
    );
}

/// The README's main command, small: it must generate data, train and report a holdout AUC
/// well above chance on the learnable generated clicks.
#[test]
fn demo_trains_on_generated_click_logs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ctr.csv");
    let text = stdout_of(
        Command::new(binary())
            .args([
                "demo", "--output", "json", "--rows", "20000", "--epochs", "2",
            ])
            .arg("--data")
            .arg(&data),
    );
    // Every line of standard output is JSON: one per epoch, per result, the summary, the AUC.
    let lines = angel_tests::json_lines(&text);
    let kind = |k: &'static str| lines.iter().filter(move |l| l["kind"] == k);
    let epochs: Vec<_> = kind("epoch").map(|l| l["epoch"].as_u64()).collect();
    assert_eq!(epochs, [Some(1), Some(2)], "{text}");
    assert!(kind("epoch").all(|l| l["holdout_auc"].as_f64().is_some() && l["rows"] == 18_000));
    let auc = kind("holdout").find_map(|l| l["auc"].as_f64());
    assert!(auc.is_some_and(|auc| auc > 0.65), "holdout AUC {auc:?}");
    assert_eq!(
        angel_tests::result_value(&text, "holdout_auc"),
        auc.unwrap()
    );
    let summary = angel_tests::summary(&text);
    let statements = summary["statements"].as_array().unwrap();
    assert!(
        statements
            .iter()
            .any(|s| s["statement"].as_str().unwrap().contains("ps_counter_seal")),
        "{summary}"
    );
    let total: f64 = statements
        .iter()
        .filter_map(|s| s["seconds"].as_f64())
        .sum();
    assert!((summary["total_seconds"].as_f64().unwrap() - total).abs() < 1e-9);
}

/// The demo within a 4 MB memory limit: its tables go mostly to disk in the temporary
/// directory, it still learns, and it leaves no file behind. Bad sizes and levels are named.
#[test]
fn demo_runs_within_a_memory_limit_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ctr.csv");
    let spill = dir.path().join("tmp");
    std::fs::create_dir(&spill).unwrap();
    let text = stdout_of(
        Command::new(binary())
            .args(["demo", "--rows", "20000", "--epochs", "2", "--memory-limit"])
            .args(["4MB", "--data"])
            .arg(&data)
            .env("TMPDIR", &spill),
    );
    assert!(text.contains("holdout AUC 0."), "{text}");
    let left: Vec<_> = std::fs::read_dir(&spill).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    for (flag, value, named) in [
        ("--storage-level", "tape", "'tape'"),
        ("--memory-limit", "lots", "lots"),
    ] {
        let out = Command::new(binary())
            .args(["demo", "--rows", "100", flag, value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(named), "{err}");
    }
}

/// `bench gbdt` trains on both data sets and reports a time, an AUC above chance and the
/// bytes pushed per tree for each.
#[test]
fn bench_gbdt_reports_each_data_set() {
    let dir = tempfile::tempdir().unwrap();
    let text = stdout_of(
        Command::new(binary())
            .args(["bench", "gbdt", "--rows", "6000", "--sparse-rows", "4000"])
            .args([
                "--sparse-features",
                "300",
                "--sparse-nnz",
                "10",
                "--trees",
                "5",
            ])
            .args(["--depth", "3", "--output", "json"])
            .env("TMPDIR", dir.path()),
    );
    let lines = angel_tests::json_lines(&text);
    let rows = lines
        .iter()
        .find(|l| l["kind"] == "table" && l["table"] == "gbdt")
        .unwrap_or_else(|| panic!("no table gbdt in:\n{text}"))["rows"]
        .as_array()
        .unwrap()
        .clone();
    for set in ["dense", "sparse"] {
        let row = (rows.iter().find(|r| r["set"] == set))
            .unwrap_or_else(|| panic!("no row for {set}:\n{text}"));
        let number = |column: &str| row[column].as_f64().unwrap_or(f64::NAN);
        assert!(number("training s") > 0.0, "{row}");
        assert!(number("holdout AUC") > 0.55, "{row}");
        assert!(number("push MB per tree") > 0.0, "{row}");
    }
}

/// `bench scale` runs the demo job at each size and reports, per size, a time, a peak RSS and
/// an AUC, and per phase a time and a peak for each size.
#[test]
fn bench_scale_reports_each_size_and_phase() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scale.md");
    let text = stdout_of(
        Command::new(binary())
            .args(["bench", "scale", "--rows", "20000,40000", "--epochs", "1"])
            .args(["--output", "json", "--out"])
            .arg(&out)
            .env("TMPDIR", dir.path()),
    );
    let lines = angel_tests::json_lines(&text);
    let table = |name: &str| {
        let line = lines
            .iter()
            .find(|l| l["kind"] == "table" && l["table"] == name)
            .unwrap_or_else(|| panic!("no table {name} in:\n{text}"));
        line["rows"].as_array().unwrap().clone()
    };
    let sizes = table("sizes");
    for rows in [20000, 40000] {
        let row = sizes
            .iter()
            .find(|r| r["rows"].as_i64() == Some(rows))
            .unwrap_or_else(|| panic!("no row for {rows}:\n{text}"));
        let number = |column: &str| row[column].as_f64().unwrap_or(f64::NAN);
        assert!(
            number("whole job s") > 0.0 && number("peak RSS MB") > 10.0,
            "{row}"
        );
        assert!(
            number("holdout AUC") > 0.6,
            "holdout AUC of {rows} rows: {row}"
        );
    }
    let phases = table("phases");
    let train = phases
        .iter()
        .find(|r| r["phase"].as_str().is_some_and(|p| p.starts_with("train")))
        .unwrap_or_else(|| panic!("no training phase:\n{text}"));
    let numbers = train
        .as_object()
        .unwrap()
        .values()
        .filter(|v| v.is_number());
    assert_eq!(numbers.count(), 4, "a time and a peak per size: {train}");
    let markdown = std::fs::read_to_string(&out).unwrap();
    assert!(
        markdown.contains("| 20000 |"),
        "the Markdown copy:\n{markdown}"
    );
}

/// A job whose CSV has a bad row fails, naming the file and line, with a non-zero exit.
#[test]
fn run_names_the_file_and_line_of_a_bad_csv_row() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.csv"), "a,b\n1,2\n3,x\n").unwrap();
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        "SELECT sum(a) FROM read_csv('${dir}/d.csv', 'columns=a int, b int');",
    )
    .unwrap();
    let out = Command::new(binary())
        .args(["run", "--var"])
        .arg(format!("dir={}", dir.path().display()))
        .arg(&job)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("job.sql:1"), "{err}");
    assert!(
        err.contains("d.csv:3: column 2 ('b'): cannot read 'x'"),
        "{err}"
    );
}

/// `run --master` sends the job's PS work to a running service (here a standalone process),
/// where the trained model stays after the job ends, in the job's namespace. Run as the README says, from the
/// repository root with no variables: the job reads the repository's own a9a files.
#[tokio::test]
async fn run_against_a_running_service_leaves_the_model_there() {
    let mut node = spawn(&["standalone", "--servers", "2", "--bind", "127.0.0.1:0"]);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = stdout_of(Command::new(binary()).current_dir(root).args([
        "run",
        "--master",
        &node.addr,
        "--namespace",
        "team",
        "examples/a9a/job.sql",
    ]));
    assert!(text.contains("test_auc"), "{text}");
    let client = angel_client::PsClient::connect(&node.addr).await.unwrap();
    let model = client.describe("team/a9a").await.unwrap();
    assert_eq!(model.meta.cols, 124, "123 features and the intercept");
    let training = model.meta.training.as_ref().expect("a model's description");
    assert_eq!(
        training.optimizer.as_ref().map(|o| o.name.as_str()),
        Some("adam")
    );
    assert_eq!(node.terminate(Duration::from_secs(10)), Some(0));
}
