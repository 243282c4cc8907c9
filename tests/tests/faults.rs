//! Fault injection on real processes with exact-value checks: the ways acknowledged data used
//! to be lost. A master restarted without its state, or with an older one, refuses changes
//! and no server drops a partition; a server restarted on its own address replaces its dead
//! predecessor at once; two servers killed together, or every server, lose nothing; a server
//! killed after its writer left keeps that writer's changes.

use std::path::Path;
use std::time::{Duration, Instant};

use angel_client::{MatrixSpec, PsClient};
use angel_proto::StatusReply;
use angel_ps_cli::local_cluster::free_port;
use angel_tests::{Node, expect, spawn};
use tonic::Code;

/// A free address on 127.0.0.1, for a process that must come back where it was.
fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port().unwrap())
}

/// A master at `bind` that declares servers dead after `timeout` seconds of silence, with its
/// state and snapshots under `dir` if given (snapshots only when asked), and `extra` flags.
fn master(bind: &str, dir: Option<&Path>, timeout: &str, extra: &[&str]) -> Node {
    let root = dir.map(|d| d.display().to_string());
    let mut args = vec![
        "master",
        "--bind",
        bind,
        "--server-timeout-secs",
        timeout,
        "--snapshot-interval-secs",
        "3600",
    ];
    if let Some(root) = &root {
        args.extend(["--snapshot-dir", root]);
    }
    args.extend_from_slice(extra);
    spawn(&args)
}

/// A server of `master` at `bind` (port 0: any), heartbeating every 200 ms.
fn server(master: &str, bind: &str) -> Node {
    spawn(&[
        "server",
        "--master",
        master,
        "--bind",
        bind,
        "--heartbeat-ms",
        "200",
    ])
}

/// The keys every test writes: 143 of 1,000 columns, spread over every partition.
fn keys() -> Vec<u64> {
    (0..1000).step_by(7).collect()
}

/// Creates sparse matrix `name` (1 x 1,000) and adds 1.0 at every key of [`keys`].
async fn fill(c: &PsClient, name: &str) {
    c.create_matrix(MatrixSpec::sparse(name, 1, 1000))
        .await
        .unwrap();
    add(c, name, 1.0).await;
}

/// Adds `value` at every key of [`keys`] in row 0 of `name`.
async fn add(c: &PsClient, name: &str, value: f32) {
    let keys = keys();
    let values = vec![value; keys.len()];
    c.push_keys(name, 0, &keys, &values).await.unwrap();
}

/// Row 0 of `name` at [`keys`] must hold exactly `value` everywhere.
async fn check(c: &PsClient, name: &str, value: f32) {
    let values = c.pull_keys::<f32>(name, 0, &keys()).await.unwrap();
    let wrong: Vec<_> = keys()
        .into_iter()
        .zip(&values)
        .filter(|(_, v)| **v != value)
        .collect();
    assert!(wrong.is_empty(), "'{name}': {value} expected at {wrong:?}");
}

/// Polls the status until `done` holds (at most `limit`), and returns it.
async fn wait_for(
    c: &PsClient,
    done: impl Fn(&StatusReply) -> bool,
    limit: Duration,
) -> StatusReply {
    let deadline = Instant::now() + limit;
    loop {
        let status = c.status().await.unwrap();
        if done(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "not within {limit:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Partitions the status shows on live servers.
fn held(status: &StatusReply) -> usize {
    status.servers.iter().map(|s| s.partitions.len()).sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_master_restarted_without_its_state_refuses_changes_and_no_server_drops_data() {
    let dir = tempfile::tempdir().unwrap();
    let bind = free_addr();
    let mut first = master(&bind, Some(dir.path()), "30", &[]);
    let _servers = [server(&bind, "127.0.0.1:0"), server(&bind, "127.0.0.1:0")];
    let c = PsClient::connect(&bind).await.unwrap();
    fill(&c, "w").await;
    let before = held(&c.status().await.unwrap());

    first.kill();
    let mut stateless = master(&bind, None, "30", &[]);
    let status = wait_for(&c, |s| !s.doubt.is_empty(), Duration::from_secs(20)).await;
    assert!(status.doubt.contains("does not know"), "{}", status.doubt);
    let refused = c.create_matrix(MatrixSpec::sparse("x", 1, 10)).await;
    expect(
        refused.unwrap_err(),
        Code::FailedPrecondition,
        &["refuses changes", "--start-empty"],
    );

    stateless.kill();
    let mut resumed = master(&bind, Some(dir.path()), "30", &[]);
    let fresh = PsClient::connect(&bind).await.unwrap();
    check(&fresh, "w", 1.0).await;
    let status = wait_for(&fresh, |s| s.servers.len() == 2, Duration::from_secs(20)).await;
    assert!(status.doubt.is_empty(), "{}", status.doubt);
    assert!(status.recoveries.is_empty(), "{:?}", status.recoveries);
    assert_eq!(held(&status), before, "every partition kept in place");

    // Told to start empty, the master has the servers drop what they hold.
    resumed.kill();
    let _empty = master(&bind, Some(dir.path()), "30", &["--start-empty"]);
    let emptied = |s: &StatusReply| s.servers.len() == 2 && held(s) == 0;
    let status = wait_for(&fresh, emptied, Duration::from_secs(20)).await;
    assert!(status.doubt.is_empty(), "{}", status.doubt);
    fill(&fresh, "w").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_master_resumed_from_an_older_state_refuses_changes_and_restores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bind = free_addr();
    let mut first = master(&bind, Some(dir.path()), "2", &[]);
    let _servers = [server(&bind, "127.0.0.1:0"), server(&bind, "127.0.0.1:0")];
    let c = PsClient::connect(&bind).await.unwrap();
    fill(&c, "w").await;
    let older = tempfile::tempdir().unwrap();
    copy_dir(&dir.path().join("master"), older.path());
    fill(&c, "v").await;

    first.kill();
    std::fs::remove_dir_all(dir.path().join("master")).unwrap();
    copy_dir(older.path(), &dir.path().join("master"));
    let _resumed = master(&bind, Some(dir.path()), "2", &[]);
    let status = wait_for(&c, |s| !s.doubt.is_empty(), Duration::from_secs(20)).await;
    assert!(
        status.doubt.contains("newer than the saved state"),
        "{}",
        status.doubt
    );
    let refused = c.create_counter("f").await;
    expect(
        refused.unwrap_err(),
        Code::FailedPrecondition,
        &["refuses changes"],
    );
    // Past the server timeout, nothing was declared dead or restored over newer data.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = c.status().await.unwrap();
    assert!(status.recoveries.is_empty(), "{:?}", status.recoveries);
    check(&c, "v", 1.0).await;
    check(&c, "w", 1.0).await;
}

/// Copies the files of `from` (recursively) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        match entry.file_type().unwrap().is_dir() {
            true => copy_dir(&entry.path(), &target),
            false => drop(std::fs::copy(entry.path(), target).unwrap()),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_restarted_on_its_address_replaces_its_dead_predecessor_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let bind = free_addr();
    let _master = master(&bind, Some(dir.path()), "30", &[]);
    let at = free_addr();
    let _kept = server(&bind, "127.0.0.1:0");
    let mut doomed = server(&bind, &at);
    let c = PsClient::connect(&bind).await.unwrap();
    fill(&c, "w").await;
    c.snapshot().await.unwrap();

    doomed.kill();
    let started = Instant::now();
    let _again = server(&bind, &at);
    // The master no longer sends the dead process's admin token to the new one.
    c.create_counter("f").await.unwrap();
    c.counter_increase("f", &["a", "b"], &[1, 1]).await.unwrap();
    check(&c, "w", 1.0).await;
    let status = c.status().await.unwrap();
    let recovery = status.recoveries.iter().find(|r| r.addr == at);
    let recovery = recovery.unwrap_or_else(|| panic!("{:?}", status.recoveries));
    assert!(
        recovery.cause.contains("registered at its address"),
        "{recovery:?}"
    );
    assert!(recovery.error.is_empty(), "{recovery:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "not waiting for the timeout"
    );
}

/// A master at `bind` (snapshots under `dir`, servers silent for `timeout` seconds declared
/// dead) and `servers` servers, with `w` filled and snapshotted, then added to once more:
/// every key holds 2.0, the second 1.0 kept only by the client for replay.
async fn snapshotted(
    bind: &str,
    dir: &Path,
    timeout: &str,
    servers: usize,
) -> (Node, Vec<Node>, std::sync::Arc<PsClient>) {
    let master = master(bind, Some(dir), timeout, &[]);
    let servers = (0..servers).map(|_| server(bind, "127.0.0.1:0")).collect();
    let c = PsClient::connect(bind).await.unwrap();
    fill(&c, "w").await;
    c.snapshot().await.unwrap();
    add(&c, "w", 1.0).await;
    (master, servers, c)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_killed_at_once_lose_nothing_when_one_restore_target_is_dead_too() {
    let dir = tempfile::tempdir().unwrap();
    let (_master, mut servers, c) = snapshotted(&free_addr(), dir.path(), "30", 3).await;

    // Both die before the master hears of either: the first recovery picks the second as a
    // target, fails there, and goes on to the survivor.
    servers[0].kill();
    servers[1].kill();
    check(&c, "w", 2.0).await;
    let status = c.status().await.unwrap();
    assert_eq!(status.recoveries.len(), 2, "{:?}", status.recoveries);
    for r in &status.recoveries {
        assert!(r.error.is_empty(), "{r:?}");
    }
    assert_eq!(c.replay_counts().1, 0, "nothing lost");
}

#[tokio::test(flavor = "multi_thread")]
async fn partitions_with_no_live_server_left_wait_for_one_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bind = free_addr();
    let (_master, mut servers, c) = snapshotted(&bind, dir.path(), "2", 2).await;

    servers[0].kill();
    servers[1].kill();
    let reader = c.clone();
    let pull = tokio::spawn(async move { check(&reader, "w", 2.0).await });
    let waiting = |s: &StatusReply| s.servers.is_empty() && s.recoveries.len() == 2;
    let status = wait_for(&c, waiting, Duration::from_secs(20)).await;
    for r in &status.recoveries {
        assert!(r.error.contains("not restored yet"), "{r:?}");
    }
    let _newcomer = server(&bind, "127.0.0.1:0");
    tokio::time::timeout(Duration::from_secs(40), pull)
        .await
        .expect("the pull ends once a server took the partitions")
        .unwrap();
    let status = c.status().await.unwrap();
    for r in &status.recoveries {
        assert!(r.error.is_empty() && r.restored > 0, "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_after_its_writer_left_keeps_the_writers_changes() {
    let dir = tempfile::tempdir().unwrap();
    let bind = free_addr();
    let _master = master(&bind, Some(dir.path()), "30", &[]);
    let mut servers = [server(&bind, "127.0.0.1:0"), server(&bind, "127.0.0.1:0")];
    let writer = PsClient::connect(&bind).await.unwrap();
    fill(&writer, "w").await;
    // What a job does at its end; the snapshot interval (an hour) never comes.
    let written = writer.make_durable().await.unwrap();
    assert!(written.partitions > 0, "{written:?}");
    drop(writer);

    servers[1].kill();
    let reader = PsClient::connect(&bind).await.unwrap();
    check(&reader, "w", 1.0).await;
    assert_eq!(
        reader.replay_counts(),
        (0, 0),
        "nothing to replay: all in the snapshot"
    );
}

/// Sends `signal` (STOP, CONT) to `node`'s process.
fn signal(node: &Node, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &node.pid().to_string()])
        .status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -{signal}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_server_woken_after_its_replacement_serves_and_writes_nothing_stale() {
    let dir = tempfile::tempdir().unwrap();
    let bind = free_addr();
    let root = dir.path().display().to_string();
    let _master = spawn(&[
        "master",
        "--bind",
        &bind,
        "--server-timeout-secs",
        "2",
        "--snapshot-dir",
        &root,
        "--snapshot-interval-secs",
        "0.2",
    ]);
    let mut servers: Vec<Node> = (0..3).map(|_| server(&bind, "127.0.0.1:0")).collect();
    let c = PsClient::connect(&bind).await.unwrap();
    fill(&c, "w").await;
    c.snapshot().await.unwrap();
    // Changes the frozen server holds and no snapshot has yet.
    add(&c, "w", 1.0).await;
    signal(&servers[1], "STOP");
    let frozen_at = Instant::now();
    // Blocked on the frozen server, the push fails over to its replacement.
    add(&c, "w", 1.0).await;
    let took = frozen_at.elapsed();
    check(&c, "w", 3.0).await;
    let status = c.status().await.unwrap();
    // A live server starved of CPU past the 2 s timeout may be replaced too: still exact.
    let frozen = &servers[1].addr;
    assert!(
        status.recoveries.iter().any(|r| &r.addr == frozen),
        "{:?}",
        status.recoveries
    );
    // Woken, it must neither serve its stale copies nor snapshot them over the new owners'.
    signal(&servers[1], "CONT");
    let rejoined = |s: &StatusReply| s.servers.len() == 3;
    wait_for(&c, rejoined, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    add(&c, "w", 1.0).await;
    c.snapshot().await.unwrap();
    // A new owner dies: its partitions come back from snapshots no stale copy replaced, read
    // by a client with nothing to replay.
    let fresh = PsClient::connect(&bind).await.unwrap();
    drop(c);
    servers[0].kill();
    check(&fresh, "w", 4.0).await;
    eprintln!("the push that found the frozen server returned after {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_replay_buffer_asks_for_snapshots_instead_of_dropping_changes() {
    let dir = tempfile::tempdir().unwrap();
    let bind = free_addr();
    let _master = master(&bind, Some(dir.path()), "30", &[]);
    let mut servers = [server(&bind, "127.0.0.1:0"), server(&bind, "127.0.0.1:0")];
    // Room for about two pushes of the 143 keys; the snapshot interval (an hour) never comes.
    let config = angel_client::ClientConfig {
        replay_bytes: 4 << 10,
        ..angel_client::ClientConfig::default()
    };
    let c = PsClient::connect_with(&bind, config).await.unwrap();
    fill(&c, "w").await;
    for _ in 1..50 {
        add(&c, "w", 1.0).await;
    }
    servers[1].kill();
    check(&c, "w", 50.0).await;
    assert_eq!(c.replay_counts().1, 0, "nothing lost");
    let status = c.status().await.unwrap();
    let durable = status.servers.iter().flat_map(|s| &s.partitions);
    assert!(
        durable.clone().all(|p| p.durable > 1),
        "snapshots were asked for: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_store_that_fails_is_shown_and_a_restart_from_its_stale_state_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bind = free_addr();
    let root = dir.path().display().to_string();
    let flags = ["--snapshot-dir", &root, "--snapshot-interval-secs", "0.2"];
    let master_args = [&["master", "--bind", &bind][..], &flags].concat();
    let mut first = spawn(&master_args);
    let _servers = [server(&bind, "127.0.0.1:0"), server(&bind, "127.0.0.1:0")];
    let c = PsClient::connect(&bind).await.unwrap();
    fill(&c, "w").await;
    // The store fails from now on (as a full disk would): a file stands where the master's
    // and the partitions' folders were, which are kept aside.
    let aside = |part: &str| dir.path().join(format!("{part}.aside"));
    for part in ["master", "partitions"] {
        std::fs::rename(dir.path().join(part), aside(part)).unwrap();
        std::fs::write(dir.path().join(part), "in the way").unwrap();
    }
    add(&c, "w", 1.0).await;
    // A server joining changes the master's state, which it cannot save.
    let _third = server(&bind, "127.0.0.1:0");
    let failing = |s: &StatusReply| {
        !s.state_error.is_empty() && s.servers.iter().any(|s| !s.snapshot_error.is_empty())
    };
    let status = wait_for(&c, failing, Duration::from_secs(20)).await;
    let shown = angel_ps_cli::status::render(&status);
    assert!(
        shown.contains("THE MASTER CANNOT SAVE ITS STATE") && shown.contains("SNAPSHOTS FAIL"),
        "{shown}"
    );

    // Restarted once the store works again, on the state saved before it failed: older than
    // what the servers saw, so it refuses changes and restores nothing over live data.
    first.kill();
    for part in ["master", "partitions"] {
        std::fs::remove_file(dir.path().join(part)).unwrap();
        std::fs::rename(aside(part), dir.path().join(part)).unwrap();
    }
    let _again = spawn(&master_args);
    let status = wait_for(&c, |s| !s.doubt.is_empty(), Duration::from_secs(20)).await;
    assert!(
        status.doubt.contains("newer than the saved state"),
        "{}",
        status.doubt
    );
    check(&c, "w", 2.0).await;
}
