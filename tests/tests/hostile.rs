//! A hostile or broken client against real master and server processes: requests built to
//! corrupt data, to make a server work or allocate without bound, or to do the master's job.
//! Each is refused with the right status, changes nothing, and leaves the service serving.

use std::time::Duration;

use angel_client::MatrixSpec;
use angel_proto::master_client::MasterClient;
use angel_proto::{
    Caller, CounterAdminOp, CounterAdminRequest, CreatePartitionsRequest, DropPartitionsRequest,
    OptimizerInfo, PsfBlock, PsfOperand, PsfRequest, PullRequest, PushRequest,
    RegisterServerRequest, RowSlice, ValueType, WriteSnapshotRequest, codec, wire,
};
use angel_tests::{Cluster, expect, raw_server, spawn, status};
use bytes::Bytes;
use tonic::Code;

#[tokio::test]
async fn only_the_master_may_create_drop_or_seal() {
    let cluster = Cluster::start(1);
    let c = cluster.client().await;
    let m = c
        .create_matrix(MatrixSpec::dense("d", 1, 64))
        .await
        .unwrap();
    c.push_keys("d", 0, &[3], &[1.5f32]).await.unwrap();
    let host = &cluster.servers[0].addr;
    let reset = CreatePartitionsRequest {
        matrix: Some(m.meta.clone()),
        partition_ids: vec![m.meta.partitions[0].id],
        epoch: u64::MAX,
        restore: false,
    };
    let err = status(raw_server(host).await.create_partitions(reset).await);
    expect(err, Code::PermissionDenied, &["CreatePartitions", "master"]);
    let drop = DropPartitionsRequest {
        matrix_id: m.meta.id,
        epoch: u64::MAX,
    };
    let err = status(raw_server(host).await.drop_partitions(drop).await);
    expect(err, Code::PermissionDenied, &["DropPartitions"]);
    c.create_counter("f").await.unwrap();
    let seal = CounterAdminRequest {
        op: CounterAdminOp::Seal as i32,
        counter: Some(c.counter("f").await.unwrap().meta.clone()),
        ..Default::default()
    };
    let err = status(raw_server(host).await.counter_admin(seal).await);
    expect(err, Code::PermissionDenied, &["CounterAdmin"]);
    let snapshot = WriteSnapshotRequest::default();
    let err = status(raw_server(host).await.write_snapshot(snapshot).await);
    expect(err, Code::PermissionDenied, &["WriteSnapshot"]);
    assert_eq!(
        c.pull_keys::<f32>("d", 0, &[3]).await.unwrap(),
        vec![1.5],
        "the refused calls changed nothing"
    );
    c.counter_increase("f", &["a"], &[1]).await.unwrap();
    assert_eq!(c.counter_seal("f", 1).await.unwrap().meta.size, 1);
}

#[tokio::test]
async fn a_server_the_master_cannot_reach_is_not_registered() {
    let cluster = Cluster::start(1);
    let mut master = MasterClient::connect(format!("http://{}", cluster.master.addr))
        .await
        .unwrap();
    let request = |addr: &str, optimizers: usize| RegisterServerRequest {
        addr: addr.into(),
        optimizers: vec![OptimizerInfo::default(); optimizers],
        admin_token: "abc123".into(),
        ..Default::default()
    };
    let err = status(master.register_server(request("127.0.0.1:1", 0)).await);
    expect(
        err,
        Code::Unavailable,
        &["did not answer", "127.0.0.1:1", "--advertise"],
    );
    let err = status(master.register_server(request(&"a".repeat(5000), 0)).await);
    expect(err, Code::InvalidArgument, &["1 to 256 bytes, got 5000"]);
    let err = status(
        master
            .register_server(request("127.0.0.1:1", 100_000))
            .await,
    );
    expect(err, Code::InvalidArgument, &["100000 optimizers"]);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::dense("after", 1, 8))
        .await
        .unwrap();
    assert_eq!(c.status().await.unwrap().servers.len(), 1);
}

#[tokio::test]
async fn a_silent_server_takes_no_new_partitions_and_an_impostor_cannot_register() {
    let master = spawn(&[
        "master",
        "--bind",
        "127.0.0.1:0",
        "--server-timeout-secs",
        "2",
    ]);
    let server = |_| {
        spawn(&[
            "server",
            "--master",
            &master.addr,
            "--bind",
            "127.0.0.1:0",
            "--heartbeat-ms",
            "200",
        ])
    };
    let (live, mut silent) = (server(0), server(1));
    // Registering a real server's address under another token: the probe needs the token.
    let mut raw_master = MasterClient::connect(format!("http://{}", master.addr))
        .await
        .unwrap();
    let impostor = RegisterServerRequest {
        addr: live.addr.clone(),
        optimizers: Vec::new(),
        admin_token: "impostor".into(),
        ..Default::default()
    };
    let err = status(raw_master.register_server(impostor.clone()).await);
    expect(err, Code::Unavailable, &[&live.addr, "permission denied"]);
    // Nor can it take over a registered server's id by claiming to rejoin.
    let rejoin = RegisterServerRequest {
        rejoin: true,
        previous_id: 0,
        ..impostor
    };
    let err = status(raw_master.register_server(rejoin).await);
    expect(err, Code::NotFound, &["not awaited"]);
    // A server that stops heartbeating holds up no creation.
    silent.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let c = angel_client::PsClient::connect(&master.addr).await.unwrap();
    let m = c
        .create_matrix(MatrixSpec::dense("d", 1, 64))
        .await
        .unwrap();
    let hosts: std::collections::BTreeSet<u32> =
        m.meta.partitions.iter().map(|p| p.server_id).collect();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    c.push_keys("d", 0, &[1], &[2.0f32]).await.unwrap();
    assert_eq!(c.pull_keys::<f32>("d", 0, &[1]).await.unwrap(), vec![2.0]);
}

#[tokio::test]
async fn a_rejected_ps_function_changes_nothing_and_each_block_runs_once() {
    let cluster = Cluster::start(1);
    let c = cluster.client().await;
    let m = c
        .create_matrix(MatrixSpec::dense("v", 1, 100))
        .await
        .unwrap();
    let host = &cluster.servers[0].addr;
    let first = m.meta.partitions[0].id;
    let call = |blocks: Vec<Vec<u32>>| PsfRequest {
        caller: None,
        name: "fill".into(),
        operands: vec![PsfOperand {
            matrix_id: m.meta.id,
            row: 0,
        }],
        args: vec![123.0],
        blocks: blocks
            .into_iter()
            .map(|partition_ids| PsfBlock { partition_ids })
            .collect(),
    };
    let err = status(
        raw_server(host)
            .await
            .call_psf(call(vec![vec![first], vec![999]]))
            .await,
    );
    assert!(
        matches!(err.code(), Code::FailedPrecondition | Code::NotFound),
        "{err}"
    );
    let row = c.pull_rows::<f32>("v", &[0]).await.unwrap().remove(0);
    assert!(
        row.iter().all(|&x| x == 0.0),
        "a rejected fill wrote {row:?}"
    );
    let twice = vec![vec![first]; 4000];
    let err = status(raw_server(host).await.call_psf(call(twice)).await);
    expect(err, Code::InvalidArgument, &["named twice"]);
}

#[tokio::test]
async fn sizes_from_requests_cannot_overflow() {
    let master = spawn(&["master", "--bind", "127.0.0.1:0", "--parts-per-server", "1"]);
    let _server = spawn(&["server", "--master", &master.addr, "--bind", "127.0.0.1:0"]);
    let c = angel_client::PsClient::connect(&master.addr).await.unwrap();
    let m = c
        .create_matrix(MatrixSpec::sparse("wide", 1, (1 << 62) + 1))
        .await
        .unwrap();
    let part = &m.meta.partitions[0];
    assert!(
        (part.col_end - part.col_start).checked_mul(4).is_none(),
        "the block must be wide enough for width x 4 to wrap"
    );
    let push = PushRequest {
        caller: None,
        matrix_id: m.meta.id,
        value_type: ValueType::F32 as i32,
        slices: vec![RowSlice {
            partition_id: part.id,
            row: 0,
            keys: Bytes::new(),
            values: wire::encode_values(&[9.0f32]),
            codec: codec::RAW,
        }],
        gradients: false,
        bases: Vec::new(),
    };
    let addr = &c.status().await.unwrap().servers[0].addr;
    let err = status(raw_server(addr).await.push(push).await);
    expect(err, Code::InvalidArgument, &["4 value bytes"]);
    assert_eq!(
        c.pull_keys::<f32>("wide", 0, &[0]).await.unwrap(),
        vec![0.0]
    );
}

#[tokio::test]
async fn work_and_memory_are_bounded_by_what_was_sent() {
    let cluster = Cluster::start_with(
        1,
        &[
            "--max-message-bytes",
            "2000000",
            "--memory-budget",
            "20000000",
        ],
    );
    let c = cluster.client().await;
    let host = &cluster.servers[0].addr;
    // A dense matrix past the server's memory budget is refused before any zero-filling.
    let err = c
        .create_matrix(MatrixSpec::dense("huge", 1, 1 << 33))
        .await
        .unwrap_err();
    expect(err, Code::ResourceExhausted, &["'huge'", "--memory-budget"]);
    // A compressed push whose pairs decode past the request limit: refused before decoding.
    let m = c
        .create_matrix(MatrixSpec::sparse("s", 1, 1 << 40))
        .await
        .unwrap();
    let keys: Vec<u64> = (0..300_000).collect();
    let values = vec![0.25f32; keys.len()];
    let sketch = "sketchml".parse().unwrap();
    let encoded = codec::encode_slice(&sketch, &keys, &values);
    assert_eq!(encoded.codec, codec::SKETCHML);
    assert!(
        encoded.values.len() < 2_000_000,
        "{} bytes",
        encoded.values.len()
    );
    let part = m.meta.partitions.iter().find(|p| p.col_start == 0).unwrap();
    let bomb = PushRequest {
        caller: None,
        matrix_id: m.meta.id,
        value_type: ValueType::F32 as i32,
        slices: vec![RowSlice {
            partition_id: part.id,
            row: 0,
            keys: encoded.keys,
            values: encoded.values,
            codec: encoded.codec,
        }],
        gradients: false,
        bases: Vec::new(),
    };
    let err = status(raw_server(host).await.push(bomb).await);
    expect(err, Code::ResourceExhausted, &["300000 pairs"]);
    // One small pull naming a whole block 100 times: refused, nothing is built.
    let d = c
        .create_matrix(MatrixSpec::dense("d", 300, 10_000))
        .await
        .unwrap();
    let whole = |partition_id, row| RowSlice {
        partition_id,
        row,
        ..Default::default()
    };
    let pull = |slices| PullRequest {
        caller: Some(Caller::default()),
        matrix_id: d.meta.id,
        value_type: ValueType::F32 as i32,
        slices,
    };
    let first = d.meta.partitions[0];
    let twice = pull(vec![whole(first.id, first.row_start); 100]);
    let err = status(raw_server(host).await.pull(twice).await);
    expect(err, Code::InvalidArgument, &["named twice"]);
    // Every row once: 12 MB, over 4 x the 2 MB request limit, from a 15 KB request.
    let every: Vec<RowSlice> = d
        .meta
        .partitions
        .iter()
        .flat_map(|p| (p.row_start..p.row_end).map(|r| whole(p.id, r)))
        .collect();
    let err = status(raw_server(host).await.pull(pull(every)).await);
    expect(
        err,
        Code::ResourceExhausted,
        &["reply", "--max-message-bytes"],
    );
    // Still serving.
    c.push_keys("s", 0, &[7], &[1.0f32]).await.unwrap();
    assert_eq!(c.pull_keys::<f32>("s", 0, &[7]).await.unwrap(), vec![1.0]);
}

#[tokio::test]
async fn a_partition_missing_from_an_up_to_date_caller_is_not_found() {
    let cluster = Cluster::start(1);
    let c = cluster.client().await;
    let m = c.create_matrix(MatrixSpec::dense("d", 1, 8)).await.unwrap();
    let pull = PullRequest {
        caller: Some(Caller {
            map_epoch: u64::MAX,
            ..Default::default()
        }),
        matrix_id: m.meta.id + 100,
        value_type: ValueType::F32 as i32,
        slices: vec![RowSlice::default()],
    };
    let err = status(raw_server(&cluster.servers[0].addr).await.pull(pull).await);
    expect(err, Code::NotFound, &["no partition 0"]);
}

#[tokio::test]
async fn a_stalled_upload_is_cut_off_by_the_request_timeout() {
    let cluster = Cluster::start_with(1, &["--request-timeout-secs", "2"]);
    let addr = cluster.servers[0].addr.clone();
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/angel.v1.Server/Push"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut body) = client.send_request(request, false).unwrap();
    // A gRPC message declared as 300 MB, of which 1 MB arrives; then nothing.
    let mut frame = vec![0u8];
    frame.extend(300_000_000u32.to_be_bytes());
    frame.extend(vec![0u8; 1 << 20]);
    body.send_data(frame.into(), false).unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(15), response)
        .await
        .expect("the server answered the stalled request within 15 s");
    let grpc_status = answer.map(|r| {
        r.headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap_or_default().to_string())
    });
    match grpc_status {
        // DEADLINE_EXCEEDED (4) or CANCELLED (1), as a trailers-only answer.
        Ok(Some(code)) => assert!(code == "4" || code == "1", "grpc-status {code}"),
        Ok(None) => panic!("an answer without grpc-status"),
        // Or the stream was reset.
        Err(e) => assert!(e.is_reset() || e.is_go_away(), "{e}"),
    }
    drop(body);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::dense("after", 1, 8))
        .await
        .unwrap();
}

#[tokio::test]
async fn oversized_metadata_is_refused() {
    let cluster = Cluster::start(1);
    let mut server = raw_server(&cluster.servers[0].addr).await;
    let mut request = tonic::Request::new(angel_proto::PullRequest::default());
    let filler = "a".repeat(64 << 10);
    request
        .metadata_mut()
        .insert("x-filler", filler.parse().unwrap());
    assert!(
        server.pull(request).await.is_err(),
        "64 KiB of metadata was accepted"
    );
    let plain = tonic::Request::new(angel_proto::PullRequest::default());
    server.pull(plain).await.unwrap();
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::dense("after", 1, 8))
        .await
        .unwrap();
}

/// Connections that never send a request (raw TCP to the gRPC port) and a request whose
/// headers trickle in (slowloris, on the HTTP port) are closed within seconds; clients are
/// served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_hold_a_port_without_a_request_are_closed() {
    use std::io::{Read, Write};
    let cluster = Cluster::start_flags(1, &["--http", "127.0.0.1:0"], &[]);
    let http = cluster.master.next_word(Duration::from_secs(10)).unwrap();
    let http = http.trim_start_matches("http://").trim_end_matches('/');
    let silent: Vec<std::net::TcpStream> = (0..50)
        .map(|_| std::net::TcpStream::connect(&cluster.master.addr).unwrap())
        .collect();
    let mut slow = std::net::TcpStream::connect(http).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();

    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("w", 1, 10))
        .await
        .unwrap();
    for mut conn in silent.into_iter().chain([slow.try_clone().unwrap()]) {
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let started = std::time::Instant::now();
        let mut buf = [0u8; 512];
        // Closed: end of stream or a reset; a timeout means it was held.
        let read = conn.read(&mut buf);
        assert!(
            !matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::TimedOut),
            "held for {:?}: {read:?}",
            started.elapsed()
        );
        // Keeps the slow sender trickling headers while the silent ones are read.
        let _ = slow.write_all(b"X-A: b\r\n");
    }
    c.pull_keys::<f32>("w", 0, &[1]).await.unwrap();
}

/// Idle HTTP/2 connections that answer the master's pings and never send a request (tonic
/// channels left unused) fill every slot of its gate (under an open-file limit of 1,024: 384
/// slots for all its listeners); a new client is still served, once the connection idle
/// longest has idled past the gate's idle time (15 s) and is closed to make room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_answering_pings_do_not_lock_a_client_out() {
    let binary = angel_tests::binary();
    let args = ["--nofile=1024:1024", binary.to_str().unwrap()];
    let master = angel_tests::Node::spawn(
        std::path::Path::new("prlimit"),
        &[&args[..], &["master", "--bind", "127.0.0.1:0"]].concat(),
    )
    .unwrap();
    let url = format!("http://{}", master.addr);
    let connect = |_: usize| {
        let endpoint = tonic::transport::Endpoint::from_shared(url.clone()).unwrap();
        async move {
            let endpoint = endpoint.connect_timeout(Duration::from_secs(3));
            tokio::time::timeout(Duration::from_secs(5), endpoint.connect()).await
        }
    };
    let tasks: Vec<_> = (0..420).map(|i| tokio::spawn(connect(i))).collect();
    let mut idle = Vec::new();
    for task in tasks {
        idle.push(task.await.unwrap());
    }
    let held = idle.iter().filter(|c| matches!(c, Ok(Ok(_)))).count();
    assert!(held >= 384, "the idle connections took every slot: {held}");
    let asked = async {
        let mut client = MasterClient::new(connect(0).await.unwrap().unwrap());
        client.status(angel_proto::StatusRequest::default()).await
    };
    let status = tokio::time::timeout(Duration::from_secs(60), asked).await;
    let status = status.expect("a new client is served within a minute");
    status.unwrap();
    drop(idle);
}
