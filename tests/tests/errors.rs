//! Every error a caller can meet, asserted by gRPC status code and message, through the client
//! and through raw requests to a server; and random payloads never bring a server down.

use angel_client::{ClientConfig, MatrixSpec, ValueType};
use angel_proto::{PullRequest, PushRequest, RowSlice, wire};
use angel_tests::{Cluster, expect, raw_server, run_job, status};
use bytes::Bytes;
use tonic::Code;

#[tokio::test]
async fn client_errors_name_the_matrix_key_and_row() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("w", 2, 1000))
        .await
        .unwrap();

    expect(
        c.pull_keys::<f32>("nope", 0, &[1]).await.unwrap_err(),
        Code::NotFound,
        &["'nope'", "w"],
    );
    expect(
        c.drop_matrix("nope").await.unwrap_err(),
        Code::NotFound,
        &["'nope'"],
    );
    expect(
        c.describe("nope").await.unwrap_err(),
        Code::NotFound,
        &["'nope'"],
    );
    expect(
        c.create_matrix(MatrixSpec::sparse("w", 1, 10))
            .await
            .unwrap_err(),
        Code::AlreadyExists,
        &["'w'"],
    );
    expect(
        c.create_matrix(MatrixSpec::sparse("huge", 1, u64::MAX))
            .await
            .unwrap_err(),
        Code::InvalidArgument,
        &["'huge'", "2^63"],
    );
    expect(
        c.create_matrix(MatrixSpec::dense("empty", 0, 10))
            .await
            .unwrap_err(),
        Code::InvalidArgument,
        &["'empty'", "no elements"],
    );
    expect(
        c.pull_keys::<f32>("w", 0, &[5, 1000]).await.unwrap_err(),
        Code::OutOfRange,
        &["key 1000", "'w'"],
    );
    expect(
        c.push_keys("w", 2, &[5], &[1.0f32]).await.unwrap_err(),
        Code::OutOfRange,
        &["row 2", "'w'"],
    );
    expect(
        c.pull_keys::<f64>("w", 0, &[5]).await.unwrap_err(),
        Code::InvalidArgument,
        &["'w'", "F32"],
    );
    expect(
        c.push_keys("w", 0, &[1, 2], &[1.0f32]).await.unwrap_err(),
        Code::InvalidArgument,
        &["2 keys but 1 values"],
    );
    expect(
        c.push_row("w", 0, &[1.0f32; 999]).await.unwrap_err(),
        Code::InvalidArgument,
        &["999 values for 1000 columns"],
    );
    let nothing_changed: Vec<f32> = c.pull_keys("w", 0, &[1, 2, 5]).await.unwrap();
    assert_eq!(
        nothing_changed,
        vec![0.0; 3],
        "rejected pushes change nothing"
    );
}

#[tokio::test]
async fn servers_reject_bad_raw_requests_with_the_right_status() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    let m = c
        .create_matrix(MatrixSpec::dense("d", 1, 100))
        .await
        .unwrap();
    let part = &m.meta.partitions[0];
    let host = &cluster.servers[part.server_id as usize].addr;
    let other = &cluster.servers[1 - part.server_id as usize].addr;
    let slice = |keys: &[u64], values: Bytes| RowSlice {
        partition_id: part.id,
        row: 0,
        keys: wire::encode_keys(keys),
        values,
        codec: 0,
    };
    let pull = |slices: Vec<RowSlice>, value_type: ValueType| PullRequest {
        caller: None,
        matrix_id: m.meta.id,
        value_type: value_type as i32,
        slices,
    };

    let key_past = part.col_end;
    let err = status(
        raw_server(host)
            .await
            .pull(pull(vec![slice(&[key_past], Bytes::new())], ValueType::F32))
            .await,
    );
    expect(err, Code::OutOfRange, &[&format!("key {key_past}"), "'d'"]);
    let err = status(
        raw_server(host)
            .await
            .pull(pull(vec![slice(&[0], Bytes::new())], ValueType::F64))
            .await,
    );
    expect(err, Code::InvalidArgument, &["'d'", "F32", "F64"]);
    let mut odd = slice(&[], Bytes::new());
    odd.keys = Bytes::from_static(&[1, 2, 3]);
    let err = status(
        raw_server(host)
            .await
            .pull(pull(vec![odd], ValueType::F32))
            .await,
    );
    expect(err, Code::InvalidArgument, &["not a whole number"]);
    let err = status(
        raw_server(other)
            .await
            .pull(pull(vec![slice(&[0], Bytes::new())], ValueType::F32))
            .await,
    );
    expect(
        err,
        Code::FailedPrecondition,
        &["not on this server", "refresh"],
    );
    let push = PushRequest {
        caller: None,
        matrix_id: m.meta.id,
        value_type: ValueType::F32 as i32,
        slices: vec![slice(&[0, 1], wire::encode_values(&[1.0f32]))],
        gradients: false,
        bases: Vec::new(),
    };
    let err = status(raw_server(host).await.push(push.clone()).await);
    expect(
        err,
        Code::InvalidArgument,
        &["4 value bytes for 2 elements"],
    );
    let mut unknown = push.clone();
    unknown.slices[0].codec = 9;
    let err = status(raw_server(host).await.push(unknown).await);
    expect(err, Code::InvalidArgument, &["codec 9"]);
    let mut broken = push;
    broken.slices[0].codec = 1;
    broken.slices[0].keys = Bytes::new();
    broken.slices[0].values = Bytes::from_static(&[1, 200, 200, 200]);
    let err = status(raw_server(host).await.push(broken).await);
    expect(
        err,
        Code::InvalidArgument,
        &["sketchml payload", "truncated or corrupted"],
    );
}

#[tokio::test]
async fn oversized_requests_are_resource_exhausted_on_both_sides() {
    let cluster = Cluster::start_with(1, &["--max-message-bytes", "100000"]);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("big", 1, 1 << 40))
        .await
        .unwrap();
    let keys: Vec<u64> = (0..20_000).map(|i| i * 7919).collect();
    let values = vec![1.0f32; keys.len()];
    expect(
        c.push_keys("big", 0, &keys, &values).await.unwrap_err(),
        Code::ResourceExhausted,
        &["limit of 100000"],
    );
    let small = cluster
        .client_with(ClientConfig {
            max_message_bytes: 1000,
            ..ClientConfig::default()
        })
        .await;
    expect(
        small.push_keys("big", 0, &keys, &values).await.unwrap_err(),
        Code::ResourceExhausted,
        &["'big'", "1000-byte"],
    );
    assert_eq!(
        c.psf("nnz", &[("big", 0)], &[]).await.unwrap(),
        vec![0.0],
        "nothing was applied"
    );
    c.push_keys("big", 0, &keys[..1000], &values[..1000])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_dead_server_without_snapshots_loses_its_partitions_and_says_how_to_keep_them() {
    let mut cluster = Cluster::start(2);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::dense("v", 1, 64))
        .await
        .unwrap();
    let dead = cluster.servers[1].addr.clone();
    cluster.servers[1].kill();
    let err = c.pull_rows::<f32>("v", &[0]).await.unwrap_err();
    expect(
        err,
        Code::DataLoss,
        &[&dead, "of 'v'", "lost", "--snapshot-dir"],
    );
    let status = c.status().await.unwrap();
    let recovery = status.recoveries.iter().find(|r| r.addr == dead).unwrap();
    assert!(recovery.error.contains("--snapshot-dir"), "{recovery:?}");
    assert!(
        status.servers.iter().all(|s| s.addr != dead),
        "declared dead"
    );
}

#[tokio::test]
async fn a_dead_master_is_unavailable_and_named() {
    let mut cluster = Cluster::start(0);
    let addr = cluster.master.addr.clone();
    cluster.master.kill();
    let err = angel_client::PsClient::connect(&addr).await.unwrap_err();
    expect(err, Code::Unavailable, &["master", &addr]);
}

#[tokio::test]
async fn a_matrix_dropped_behind_a_clients_back_is_reported_not_misrouted() {
    let cluster = Cluster::start(2);
    let a = cluster.client().await;
    let b = cluster.client().await;
    a.create_matrix(MatrixSpec::dense("shared", 1, 32))
        .await
        .unwrap();
    a.pull_rows::<f32>("shared", &[0]).await.unwrap();
    b.drop_matrix("shared").await.unwrap();
    b.create_matrix(MatrixSpec::dense("shared", 1, 32))
        .await
        .unwrap();
    let err = a.push_keys("shared", 0, &[1], &[1.0f32]).await.unwrap_err();
    expect(err, Code::NotFound, &["dropped"]);
    a.refresh().await.unwrap();
    a.push_keys("shared", 0, &[1], &[1.0f32]).await.unwrap();
}

#[tokio::test]
async fn random_payloads_never_take_a_server_down() {
    let cluster = Cluster::start(1);
    let c = cluster.client().await;
    let training = angel_client::Training {
        update: angel_client::UpdateRule::Dynsgd as i32,
        ..angel_client::Training::for_optimizer(angel_client::optimizer_params("adagrad", 0.1))
    };
    let m = c
        .create_matrix(MatrixSpec::sparse("fuzz", 2, 1 << 20).training(training))
        .await
        .unwrap();
    let mut server = raw_server(&cluster.servers[0].addr).await;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..300 {
        let bytes = |n: u64, next: &mut dyn FnMut() -> u64| {
            Bytes::from((0..n % 64).map(|_| next() as u8).collect::<Vec<u8>>())
        };
        let slice = RowSlice {
            partition_id: (next() % 6) as u32,
            row: next() % 3,
            keys: bytes(next(), &mut next),
            values: bytes(next(), &mut next),
            codec: (next() % 3) as u32,
        };
        let request = PushRequest {
            caller: None,
            matrix_id: m.meta.id + (next() % 2) as u32,
            value_type: (next() % 5) as i32,
            slices: vec![slice.clone()],
            gradients: next() % 2 == 0,
            bases: vec![angel_proto::Ack {
                partition_id: (next() % 4) as u32,
                version: next(),
                durable: 0,
            }],
        };
        if let Err(s) = server.push(request).await {
            assert!(
                matches!(
                    s.code(),
                    Code::InvalidArgument
                        | Code::OutOfRange
                        | Code::FailedPrecondition
                        | Code::NotFound
                ),
                "{s:?}"
            );
        }
        let request = PullRequest {
            caller: None,
            matrix_id: m.meta.id,
            value_type: (next() % 5) as i32,
            slices: vec![slice],
        };
        if let Err(s) = server.pull(request).await {
            assert!(
                matches!(
                    s.code(),
                    Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition
                ),
                "{s:?}"
            );
        }
    }
    let before = c.pull_keys::<f32>("fuzz", 1, &[3]).await.unwrap()[0];
    c.push_keys("fuzz", 1, &[3], &[2.0f32]).await.unwrap();
    let after = c.pull_keys::<f32>("fuzz", 1, &[3]).await.unwrap()[0];
    assert_eq!(after - before, 2.0, "the server still serves correctly");
}

#[tokio::test]
async fn a_bad_replay_buffer_size_is_refused_naming_the_variable() {
    let cluster = Cluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("count.sql");
    std::fs::write(
        &job,
        "SELECT ps_counter_add('c', make_array(x)) AS n FROM (VALUES ('a')) AS t(x);",
    )
    .unwrap();
    let env = [("ANGEL_REPLAY_MB".to_string(), "lots".to_string())];
    let args = [job.to_str().unwrap(), "--master", &cluster.master.addr];
    let (_, output) = run_job(&args, &env);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("ANGEL_REPLAY_MB='lots'"), "{stderr}");
}

/// Chains the operator count missed (round 4, finding 6: each aborted the process on a stack
/// overflow) end the job with an error naming the file and line, not a crash.
#[test]
fn chains_too_deep_to_plan_fail_their_statement_and_the_process_lives() {
    let dir = tempfile::tempdir().unwrap();
    let chains = [
        (
            "casts",
            format!("SELECT 1{} AS x;", "::BIGINT".repeat(10_000)),
        ),
        (
            "is",
            format!("SELECT 1{} AS x;", " IS NOT NULL".repeat(10_000)),
        ),
        (
            "union",
            format!("SELECT 1 AS x{};", " UNION ALL SELECT 1".repeat(5_000)),
        ),
    ];
    for (name, sql) in chains {
        let job = dir.path().join(format!("{name}.sql"));
        std::fs::write(&job, format!("SELECT 1 AS ok;\n{sql}\n")).unwrap();
        let (_, output) = run_job(&[job.to_str().unwrap()], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{name}: {stderr}");
        let line = format!("{name}.sql:2");
        for word in [line.as_str(), "more than 500 levels", "split the chain"] {
            assert!(
                stderr.contains(word),
                "{name}: '{word}' missing from {stderr}"
            );
        }
    }
}
