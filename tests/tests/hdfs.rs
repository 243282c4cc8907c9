//! HDFS through hdfs-native. No name node can be installed on the test machines, so the
//! always-run test checks what holds without one: `hdfs://` URLs reach hdfs-native, and an
//! unreachable name node ends the job quickly with an error naming the URL and what to check.
//! With `ANGEL_TEST_HDFS=hdfs://namenode:port/dir` naming a real cluster, the Adult job also
//! runs with its data and model there.

use std::time::Instant;

use angel_local_cluster::free_port;
use angel_storage::Location;
use angel_tests::{repo, result_value, run_job};

#[test]
fn an_unreachable_name_node_fails_fast_naming_the_url() {
    let port = free_port().unwrap();
    let work = tempfile::tempdir().unwrap();
    // Built (if stale) before any clock starts.
    angel_tests::binary();
    for sql in [
        format!("SELECT * FROM read_csv('hdfs://127.0.0.1:{port}/logs/day.csv');"),
        format!(
            "CREATE TABLE r AS SELECT * FROM (VALUES (1.0, [0, 3])) t(y, idx);\n\
             CREATE MODEL m OPTIONS (dim = 4, epochs = 1) AS SELECT y, idx FROM r;\n\
             SAVE MODEL m TO 'hdfs://127.0.0.1:{port}/models/m';"
        ),
    ] {
        let job = work.path().join("job.sql");
        std::fs::write(&job, &sql).unwrap();
        let started = Instant::now();
        let (_, output) = run_job(&[job.to_str().unwrap()], &[]);
        let said = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(!output.status.success(), "{sql}: {said}");
        assert!(
            said.contains(&format!("hdfs://127.0.0.1:{port}")) && said.contains("name node"),
            "{said}"
        );
        let took = started.elapsed().as_secs_f64();
        assert!(took < 60.0, "took {took:.1}s");
    }
}

#[test]
fn the_adult_job_on_a_real_hdfs_when_one_is_named() {
    let Ok(root) = std::env::var("ANGEL_TEST_HDFS") else {
        eprintln!("ANGEL_TEST_HDFS is not set: no HDFS cluster to test against");
        return;
    };
    let dir = format!(
        "{}/angel-test-{}",
        root.trim_end_matches('/'),
        std::process::id()
    );
    let bytes = std::fs::read(repo("examples/data/adult/adult.data.gz")).unwrap();
    let to = Location::parse(&format!("{dir}/adult/adult.data.gz")).unwrap();
    angel_storage::write::put(&to, bytes.into()).unwrap();
    let job = repo("examples/adult/job.sql");
    let (data, out) = (format!("data={dir}/adult"), format!("out={dir}/out"));
    let (_, output) = run_job(&[job.to_str().unwrap(), "--var", &data, "--var", &out], &[]);
    let said = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(result_value(&said, "holdout_auc") >= 0.905, "{said}");
    assert!(result_value(&said, "max_difference") < 1e-6, "{said}");
    angel_storage::write::remove_all(&Location::parse(&dir).unwrap()).unwrap();
}
