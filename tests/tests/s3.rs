//! Jobs whose data, models and Ballista stage live on S3: a real S3 implementation (s3s over a
//! temporary folder) runs in the test on 127.0.0.1, and `angel-ps run` (and on Ballista the
//! scheduler and executors) use it as a user's job would use AWS, MinIO or Ceph, configured by
//! the usual `AWS_*` variables. Each job's results are compared with the same job on local
//! files.

use std::path::{Path, PathBuf};
use std::process::Output;

use angel_local_cluster::{LocalCluster, Options};
use angel_tests::s3_server::{S3Server, SECRET};
use angel_tests::{binary, repo, result_row, result_value, run_job};

/// Runs `angel-ps run args...` against `s3`, signing with `secret`, and checks that its exit
/// status is `ok`. Returns its standard output (JSON lines) when it succeeded, else stdout and
/// stderr together, where the errors are.
fn run(args: &[&str], s3: &S3Server, secret: &str, ok: bool) -> String {
    let (_, output) = run_job(args, &s3.env(secret));
    let said = text(&output);
    assert_eq!(
        output.status.success(),
        ok,
        "angel-ps run {args:?}:\n{said}"
    );
    match ok {
        true => String::from_utf8_lossy(&output.stdout).to_string(),
        false => said,
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The example job at `path` trained under BSP: two runs of it then give the same model bit
/// for bit, so a difference between them comes from the reading. Under the examples' ASP the
/// training tasks interleave differently at every run.
fn under_bsp(path: &str) -> String {
    let text = std::fs::read_to_string(repo(path)).unwrap();
    let text = match text.contains("'${sync:-asp}'") {
        true => text.replace("'${sync:-asp}'", "'bsp'"),
        false => text.replace("compression = ", "sync = 'bsp', compression = "),
    };
    assert!(
        text.contains("sync = 'bsp'"),
        "the model options of {path} changed"
    );
    text
}

/// A job file holding `sql`, in `dir`.
fn job(dir: &Path, sql: &str) -> String {
    let file = dir.join("job.sql");
    std::fs::write(&file, sql).unwrap();
    file.display().to_string()
}

#[test]
fn files_directories_and_globs_read_from_s3_as_from_local_files() {
    let s3 = S3Server::start(&["data"]);
    let examples = repo("examples/data");
    let a9a = examples.join("a9a/a9a_test.libsvm.gz");
    let adult = examples.join("adult/adult.data.gz");
    s3.put(&a9a, "data/a9a/test.libsvm.gz");
    s3.put(&a9a, "data/a9a/copy/test.libsvm.gz");
    // Compressed under a plain name: recognised by its magic bytes.
    s3.put(&adult, "data/adult.csv");
    let work = tempfile::tempdir().unwrap();
    let query = |libsvm: &str, csv: &str, all: &str| {
        job(
            work.path(),
            &format!(
                "SELECT (SELECT count(*) FROM read_libsvm('{libsvm}')) AS a9a_rows, \
                 (SELECT sum(label) FROM read_libsvm('{libsvm}')) AS a9a_positive, \
                 (SELECT count(*) FROM read_libsvm('{all}')) AS a9a_both, \
                 (SELECT count(*) FROM read_csv('{csv}', 'header=false; nulls=?; bad_rows=skip')) \
                 AS adult_rows;"
            ),
        )
    };
    let local = run(
        &[&query(
            &a9a.display().to_string(),
            &adult.display().to_string(),
            &format!("{}/a9a/*.gz", examples.display()),
        )],
        &s3,
        SECRET,
        true,
    );
    let remote = run(
        &[&query(
            "s3://data/a9a/test.libsvm.gz",
            "s3://data/adult.csv",
            "s3://data/a9a/",
        )],
        &s3,
        SECRET,
        true,
    );
    let (local, remote) = (
        result_row(&local, "a9a_rows"),
        result_row(&remote, "a9a_rows"),
    );
    assert!(local["a9a_rows"] > 10_000.0, "{local:?}");
    for column in ["a9a_rows", "a9a_positive", "adult_rows"] {
        assert_eq!(local[column], remote[column], "{column}");
    }
    // The S3 directory holds the test file twice; the local glob holds it and the training file.
    assert_eq!(remote["a9a_both"], 2.0 * remote["a9a_rows"], "{remote:?}");
    let glob = run(
        &[&job(
            work.path(),
            "SELECT count(*) AS n FROM read_libsvm('s3://data/a9a/**/*.gz');",
        )],
        &s3,
        SECRET,
        true,
    );
    assert_eq!(result_value(&glob, "n"), remote["a9a_both"]);
}

#[test]
fn a_missing_object_refused_credentials_or_unknown_scheme_name_the_url() {
    let s3 = S3Server::start(&["data"]);
    s3.put(
        &repo("examples/data/a9a/a9a_test.libsvm.gz"),
        "data/t.libsvm.gz",
    );
    let work = tempfile::tempdir().unwrap();
    let read = |url: &str| job(work.path(), &format!("SELECT * FROM read_libsvm('{url}');"));
    let said = run(&[&read("s3://data/none.libsvm")], &s3, SECRET, false);
    assert!(said.contains("s3://data/none.libsvm"), "{said}");
    let said = run(&[&read("s3://data/t.libsvm.gz")], &s3, "wrong", false);
    assert!(
        said.contains("s3://data/t.libsvm.gz") && said.contains("AWS_SECRET_ACCESS_KEY"),
        "{said}"
    );
    let said = run(&[&read("s3://nobucket/t.libsvm")], &s3, SECRET, false);
    assert!(said.contains("s3://nobucket/t.libsvm"), "{said}");
    let said = run(&[&read("gs://b/x.csv")], &s3, SECRET, false);
    assert!(said.contains("unknown URL scheme 'gs'"), "{said}");
    // A server that is not there: the endpoint's failure names the URL and what to check.
    let gone = S3Server::start(&[]);
    let env = gone.env(SECRET);
    drop(gone);
    let (_, output) = run_job(&[&read("s3://data/t.libsvm.gz")], &env);
    let said = text(&output);
    assert!(
        !output.status.success()
            && said.contains("s3://data/t.libsvm.gz")
            && said.contains("AWS_ENDPOINT"),
        "{said}"
    );
}

/// The Adult job's holdout AUC and the saved-and-reloaded model's largest difference.
fn adult(args: &[&str], s3: &S3Server, data: &str, out: &str) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let file = job(dir.path(), &under_bsp("examples/adult/job.sql"));
    let (data, out) = (format!("data={data}"), format!("out={out}"));
    let mut all = vec![file.as_str(), "--var", &data, "--var", &out];
    all.extend_from_slice(args);
    let said = run(&all, s3, SECRET, true);
    (
        result_value(&said, "holdout_auc"),
        result_value(&said, "max_difference"),
    )
}

/// The committed version directory of the model saved at `bucket/key` on `s3`.
fn committed(s3: &S3Server, model: &str) -> PathBuf {
    let version = std::fs::read_to_string(s3.path(&format!("{model}/_CURRENT"))).unwrap();
    s3.path(&format!("{model}/{}", version.trim()))
}

#[test]
fn the_adult_job_reads_and_saves_on_s3_as_on_local_files() {
    let s3 = S3Server::start(&["data", "models"]);
    let local_data = repo("examples/data/adult");
    s3.put(
        &local_data.join("adult.data.gz"),
        "data/adult/adult.data.gz",
    );
    let work = tempfile::tempdir().unwrap();
    let (local_auc, _) = adult(
        &[],
        &s3,
        &local_data.display().to_string(),
        &work.path().display().to_string(),
    );
    let (s3_auc, difference) = adult(&[], &s3, "s3://data/adult", "s3://models/adult");
    assert!(
        (s3_auc - local_auc).abs() <= 1e-9,
        "AUC from S3 {s3_auc}, from local files {local_auc}"
    );
    assert!(
        difference < 1e-6,
        "the model loaded from S3 differs by {difference}"
    );
    let saved = committed(&s3, "models/adult/adult_model");
    assert!(saved.join("weights.parquet").is_file() && saved.join("model.json").is_file());
}

#[test]
fn the_ctr_job_reads_a_directory_of_compressed_parts_from_s3_and_saves_its_model_there() {
    let s3 = S3Server::start(&["data", "models"]);
    let parts = tempfile::tempdir().unwrap();
    for part in 0..2 {
        let csv = parts.path().join(format!("part-{part}.csv"));
        angel_datagen::ctr_data::generate(&csv, 20_000, part).unwrap();
        let bytes = std::fs::read(&csv).unwrap();
        let zst = parts.path().join(format!("part-{part}.csv.zst"));
        std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
        std::fs::remove_file(&csv).unwrap();
        s3.put(&zst, &format!("data/ctr/part-{part}.csv.zst"));
    }
    let work = tempfile::tempdir().unwrap();
    let mut text = under_bsp("examples/ctr/job.sql");
    text.push_str(
        "\nSAVE MODEL ctr TO '${out}/ctr';\nLOAD MODEL ctr_loaded FROM '${out}/ctr';\n\
         SELECT max(abs(ps_predict('ctr', idx) - ps_predict('ctr_loaded', idx))) AS max_difference FROM test;\n",
    );
    let file = job(work.path(), &text);
    let ctr = |data: &str, out: &str| {
        let (data, out) = (format!("data={data}"), format!("out={out}"));
        let said = run(
            &[&file, "--var", &data, "--var", &out, "--var", "epochs=2"],
            &s3,
            SECRET,
            true,
        );
        (
            result_value(&said, "holdout_auc"),
            result_value(&said, "max_difference"),
        )
    };
    let (local_auc, _) = ctr(
        &format!("{}/*.zst", parts.path().display()),
        &work.path().display().to_string(),
    );
    let (s3_auc, difference) = ctr("s3://data/ctr/", "s3://models/run");
    assert!(
        (s3_auc - local_auc).abs() <= 1e-9,
        "CTR AUC from S3 {s3_auc}, from local files {local_auc}"
    );
    assert!(difference < 1e-6, "{difference}");
    assert!(
        committed(&s3, "models/run/ctr")
            .join("weights.parquet")
            .is_file()
    );
}

#[test]
fn adult_on_ballista_stages_its_tables_on_s3_without_a_shared_folder() {
    let s3 = S3Server::start(&["data", "models", "stage"]);
    let local_data = repo("examples/data/adult");
    s3.put(
        &local_data.join("adult.data.gz"),
        "data/adult/adult.data.gz",
    );
    let cluster = LocalCluster::start_with(
        &binary(),
        2,
        2,
        2,
        &Options {
            env: s3.env(SECRET),
            ..Options::default()
        },
    )
    .expect("cluster starts");
    let work = tempfile::tempdir().unwrap();
    let (local_auc, _) = adult(
        &["--partitions", "4"],
        &s3,
        &local_data.display().to_string(),
        &work.path().display().to_string(),
    );
    let (auc, difference) = adult(
        &[
            "--ballista",
            cluster.scheduler_url(),
            "--master",
            &cluster.master.addr,
            "--stage",
            "s3://stage/adult",
        ],
        &s3,
        "s3://data/adult",
        "s3://models/cluster",
    );
    assert!(
        (auc - local_auc).abs() <= 0.005,
        "AUC on Ballista staged on S3 {auc}, embedded on local files {local_auc}"
    );
    assert!(difference < 1e-6, "{difference}");
    let staged = staged_files(&s3.path("stage/adult"));
    assert!(staged >= 4, "{staged} Arrow IPC files staged on S3");
}

/// Staged table files (Arrow IPC) below `dir`.
fn staged_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| match e.path().is_dir() {
                true => staged_files(&e.path()),
                false => usize::from(e.path().extension().is_some_and(|x| x == "arrow")),
            })
            .sum()
    })
}

/// Snapshots kept on S3 (round 4, finding 22): a master and two servers of the binary snapshot
/// to an `s3://` directory; a server SIGKILLed once its partitions' snapshots are written has
/// them restored from S3 on the survivor, and every value (a matrix and a counter, with a
/// change made after the snapshot that the client replays) reads back exact. The master's
/// state and each partition's snapshot are objects in the bucket.
#[test]
fn a_killed_servers_partitions_come_back_exact_from_snapshots_on_s3() {
    // The S3 server runs on a runtime of its own, started outside the test's.
    let s3 = S3Server::start(&["snaps"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(snapshots_on_s3(&s3));
}

async fn snapshots_on_s3(s3: &S3Server) {
    use angel_bench::chaos::lab::{free_addr, wait_for};
    use angel_bench::chaos::probe::{Probe, Tally};
    use angel_local_cluster::Process;

    let env = s3.env(SECRET);
    let bind = free_addr().unwrap();
    let spawn = |args: &[&str]| Process::spawn_with_env(&binary(), args, &env).unwrap();
    let _master = spawn(&[
        "master",
        "--bind",
        &bind,
        "--server-timeout-secs",
        "10",
        "--snapshot-dir",
        "s3://snaps/service",
        "--snapshot-interval-secs",
        "0.2",
    ]);
    let server = [
        "server",
        "--master",
        &bind,
        "--bind",
        "127.0.0.1:0",
        "--heartbeat-ms",
        "200",
    ];
    let mut servers = [spawn(&server), spawn(&server)];
    let c = angel_client::PsClient::connect(&bind).await.unwrap();
    let both = |s: &angel_proto::StatusReply| s.servers.len() == 2;
    wait_for(&c, both, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let mut probe = Probe::filled(&c, "w").await.unwrap();
    c.snapshot().await.unwrap();
    probe.add(&c, 1.0).await.unwrap();
    servers[0].kill();
    let tally = probe.seal_and_tally(&c).await.unwrap();
    assert_eq!(tally, Tally::default(), "nothing lost or doubled");
    let status = c.status().await.unwrap();
    assert!(
        status.recoveries.len() == 1
            && status.recoveries[0].restored > 0
            && status.recoveries[0].error.is_empty(),
        "{:?}",
        status.recoveries
    );
    assert!(s3.path("snaps/service/master/_CURRENT").is_file());
    let partitions = s3.path("snaps/service/partitions");
    let snapshots = walk(&partitions)
        .filter(|p| p.file_name().is_some_and(|n| n == "_CURRENT"))
        .count();
    assert!(
        snapshots >= 16,
        "{snapshots} partition snapshots in the bucket"
    );
}

/// The files under `dir`, recursively.
fn walk(dir: &Path) -> impl Iterator<Item = PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    std::iter::from_fn(move || {
        while let Some(path) = stack.pop() {
            match std::fs::read_dir(&path) {
                Ok(entries) => stack.extend(entries.flatten().map(|e| e.path())),
                Err(_) => return Some(path),
            }
        }
        None
    })
}
