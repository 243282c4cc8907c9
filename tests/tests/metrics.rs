//! Prometheus `/metrics` on the master and every server (`--http`): scraped over real HTTP
//! and parsed as Prometheus parses it, and checked against what the test did.

use std::collections::BTreeSet;
use std::time::Duration;

use angel_client::MatrixSpec;
use angel_ps_service::{Standalone, StandaloneConfig};
use angel_tests::{Cluster, Node};
use prometheus_parse::{Sample, Scrape, Value};

/// Fetches and parses `url`'s `/metrics`, after checking each metric family is declared once
/// (Prometheus refuses a scrape that declares one twice).
async fn scrape(url: &str) -> Scrape {
    let response = reqwest::get(format!("{url}metrics")).await.unwrap();
    assert!(response.status().is_success(), "GET {url}metrics");
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE ")).collect();
    let distinct: BTreeSet<&str> = types.iter().map(|l| l.split(' ').nth(2).unwrap()).collect();
    assert_eq!(
        types.len(),
        distinct.len(),
        "a family declared twice:\n{text}"
    );
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The sum of `metric`'s samples whose labels include every pair of `labels`.
fn total(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    matching(scrape, metric, labels)
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(h) => h.iter().map(|b| b.count).fold(0.0, f64::max),
            Value::Summary(_) => panic!("{metric} is a summary"),
        })
        .sum()
}

fn matching<'a>(
    scrape: &'a Scrape,
    metric: &'a str,
    labels: &'a [(&str, &str)],
) -> impl Iterator<Item = &'a Sample> {
    scrape.samples.iter().filter(move |s| {
        s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
    })
}

/// The URL its `--http` line printed.
fn http_url(node: &Node) -> String {
    node.next_word(Duration::from_secs(10))
        .expect("a node with --http prints its URL")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_master_and_each_server_serve_metrics_that_count_what_clients_did() {
    let http = ["--http", "127.0.0.1:0"];
    let cluster = Cluster::start_flags(2, &http, &http);
    let master_url = http_url(&cluster.master);
    let server_urls: Vec<String> = cluster.servers.iter().map(http_url).collect();
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::sparse("model", 1, 1 << 40))
        .await
        .unwrap();
    // 1000 distinct keys spread over the key space, so both servers hold some.
    let keys: Vec<u64> = (0..1000u64).map(|k| k * 1_099_511_627).collect();
    let pushes = 5;
    for _ in 0..pushes {
        c.push_keys("model", 0, &keys, &vec![0.5f32; keys.len()])
            .await
            .unwrap();
    }
    assert!(c.describe("no_such_matrix").await.is_err());

    let master = scrape(&master_url).await;
    let on_master = |method| [("node", "master"), ("method", method)];
    assert_eq!(
        total(
            &master,
            "angel_ps_rpc_requests_total",
            &on_master("CreateMatrix")
        ),
        1.0
    );
    let not_found = [
        ("node", "master"),
        ("method", "DescribeMatrix"),
        ("code", "NotFound"),
    ];
    assert_eq!(total(&master, "angel_ps_rpc_errors_total", &not_found), 1.0);
    assert_eq!(
        total(
            &master,
            "angel_ps_rpc_errors_total",
            &on_master("CreateMatrix")
        ),
        0.0
    );
    assert_eq!(total(&master, "angel_ps_servers", &[]), 2.0);
    assert_eq!(total(&master, "angel_ps_matrices", &[]), 1.0);
    assert_eq!(total(&master, "angel_ps_server_up", &[]), 2.0);
    for s in &cluster.servers {
        let age = total(
            &master,
            "angel_ps_server_heartbeat_age_seconds",
            &[("addr", &s.addr)],
        );
        assert!(
            (0.0..5.0).contains(&age),
            "server {} heartbeat age {age}",
            s.addr
        );
    }

    let (mut push_rpcs, mut timed, mut accepted, mut stored) = (0.0, 0.0, 0.0, 0.0);
    for (server, url) in cluster.servers.iter().zip(&server_urls) {
        let scrape = scrape(url).await;
        let node = format!("server@{}", server.addr);
        let push = [("node", node.as_str()), ("method", "Push")];
        let requests = total(&scrape, "angel_ps_rpc_requests_total", &push);
        timed += total(&scrape, "angel_ps_rpc_duration_seconds", &push);
        let payload = total(&scrape, "angel_ps_client_push_bytes_total", &[]);
        let received = total(&scrape, "angel_ps_rpc_received_bytes_total", &push);
        assert!(
            received >= payload && payload > 0.0,
            "received {received} < payload {payload}"
        );
        push_rpcs += requests;
        accepted += total(
            &scrape,
            "angel_ps_client_pushes_total",
            &[("matrix", "model")],
        );
        stored += total(&scrape, "angel_ps_stored_keys", &[("matrix", "model")]);
    }
    assert_eq!(
        push_rpcs, accepted,
        "push RPCs against pushes the servers accepted"
    );
    assert_eq!(
        timed, accepted,
        "pushes timed against pushes the servers accepted"
    );
    assert!(
        push_rpcs >= pushes as f64,
        "{push_rpcs} push RPCs for {pushes} pushes"
    );
    assert_eq!(stored, keys.len() as f64, "keys stored over both servers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_service_serves_its_master_and_servers_in_one_scrape() {
    let config = StandaloneConfig {
        http: Some("127.0.0.1:0".parse().unwrap()),
        ..StandaloneConfig::new(2)
    };
    let service = Standalone::start(config).await.unwrap();
    let url = format!("http://{}/", service.http_addr().unwrap());
    let c = angel_client::PsClient::connect(&service.master_addr())
        .await
        .unwrap();
    c.create_matrix(MatrixSpec::dense("w", 1, 64))
        .await
        .unwrap();
    let scrape = scrape(&url).await;
    let creating: BTreeSet<&str> = matching(
        &scrape,
        "angel_ps_rpc_requests_total",
        &[("method", "CreatePartitions")],
    )
    .map(|s| s.labels.get("node").unwrap())
    .collect();
    assert_eq!(
        creating.len(),
        2,
        "both servers created partitions: {creating:?}"
    );
    assert_eq!(
        total(&scrape, "angel_ps_stored_keys", &[("matrix", "w")]),
        64.0
    );
    service.shutdown().await.unwrap();
}
