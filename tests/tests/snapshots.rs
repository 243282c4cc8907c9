//! Snapshots on real processes: a master started with `--snapshot-dir`, servers that write
//! the partitions that changed to it every interval and on request (`angel-ps snapshot`, SQL
//! `SNAPSHOT`), files that read back to what the servers hold, and the status that shows it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use angel_client::MatrixSpec;
use angel_ps_service::snapshot::SnapshotDir;
use angel_tests::{Cluster, binary};

/// Partition snapshot files below `dir` (one per partition version kept).
fn snapshot_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => stack.push(path),
                false if path.ends_with("partition.snap") => found.push(path),
                false => {}
            }
        }
    }
    found
}

/// Runs `angel-ps args...`; returns (success, stdout + stderr).
fn angel(args: &[&str]) -> (bool, String) {
    let output = Command::new(binary()).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn changed_partitions_are_written_every_interval_and_read_back_as_held() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let flags = ["--snapshot-dir", &root, "--snapshot-interval-secs", "0.2"];
    let cluster = Cluster::start_flags(2, &flags, &[]);
    let c = cluster.client().await;
    let m = c
        .create_matrix(MatrixSpec::sparse("w", 1, 1000))
        .await
        .unwrap();
    let parts = m.meta.partitions.len();
    assert_eq!(
        snapshot_files(dir.path()).len(),
        parts,
        "one each from creation"
    );
    c.push_keys("w", 0, &[1, 999], &[1.5f32, -2.0])
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    let snapshotted = loop {
        let status = c.status().await.unwrap();
        let stats: Vec<_> = status.servers.iter().flat_map(|s| &s.partitions).collect();
        let changed: Vec<_> = stats.iter().filter(|p| p.version > 0).collect();
        if changed.len() == 2 && changed.iter().all(|p| p.durable == p.version) {
            break changed.iter().map(|p| p.partition_id).collect::<Vec<_>>();
        }
        assert!(Instant::now() < deadline, "no periodic snapshot: {stats:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let snapshots = SnapshotDir::parse(&root).unwrap();
    let mut total = 0.0;
    for pid in snapshotted {
        let snapshot = snapshots.read_partition(m.meta.id, pid, u64::MAX).unwrap();
        assert_eq!(snapshot.version, 1);
        let values: Vec<f32> =
            angel_proto::wire::decode_values(&snapshot.rows[0].values, "values").unwrap();
        total += values.iter().sum::<f32>();
    }
    assert_eq!(total, -0.5, "the snapshots hold both pushed values");
    let (ok, text) = angel(&["status", "--master", &cluster.master.addr]);
    assert!(
        ok && text.contains(&format!("snapshots to file://{root}")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_on_request_writes_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let flags = ["--snapshot-dir", &root, "--snapshot-interval-secs", "3600"];
    let cluster = Cluster::start_flags(2, &flags, &[]);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("w", 1, 1000))
        .await
        .unwrap();
    c.push_keys("w", 0, &[1, 999], &[1.0f32, 1.0])
        .await
        .unwrap();
    let master = cluster.master.addr.as_str();
    let (ok, text) = angel(&["snapshot", "--master", master]);
    assert!(ok && text.contains("snapshot: 2 partitions"), "{text}");
    let (ok, text) = angel(&["snapshot", "--master", master]);
    assert!(ok && text.contains("snapshot: 0 partitions"), "{text}");

    c.push_keys("w", 0, &[2], &[1.0f32]).await.unwrap();
    let job = dir.path().join("job.sql");
    std::fs::write(&job, "SNAPSHOT;\n").unwrap();
    let (ok, text) = angel(&[
        "run",
        "--output",
        "json",
        job.to_str().unwrap(),
        "--master",
        master,
    ]);
    assert!(ok, "{text}");
    let stdout = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        angel_tests::result_value(&stdout, "partitions"),
        1.0,
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_snapshot_directory_a_snapshot_says_how_to_get_one() {
    let cluster = Cluster::start(1);
    let (ok, text) = angel(&["snapshot", "--master", &cluster.master.addr]);
    assert!(!ok && text.contains("--snapshot-dir"), "{text}");
    let (ok, text) = angel(&["status", "--master", &cluster.master.addr]);
    assert!(ok && text.contains("snapshots: off"), "{text}");
}
