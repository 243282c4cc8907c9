//! Namespaces: jobs sharing one service keep their matrices and counters apart. The Adult job
//! run three times at once against one `angel-ps standalone` (each would seal and replace the
//! others' `adult_features` and `adult` if names were global) finishes three times, each with
//! its own model and counter, which `angel-ps status` lists by namespace.

use std::collections::HashSet;
use std::process::Command;

use angel_client::{ClientConfig, MatrixSpec, PsClient, PsError};
use angel_proto::credential::{Credential, Token};
use angel_proto::server_client::ServerClient;
use angel_tests::{
    Cluster, binary, expect, finished, json_lines, push_one, repo, result_value, spawn, start_job,
    token_file,
};
use tonic::Code;
use tonic::transport::Channel;

#[test]
fn the_same_job_three_times_at_once_against_one_service_finishes_three_times() {
    let service = spawn(&["standalone", "--servers", "2", "--bind", "127.0.0.1:0"]);
    let dir = tempfile::tempdir().unwrap();
    let job = repo("examples/adult/job.sql");
    let data = format!("data={}", repo("examples/data/adult").display());
    let jobs: Vec<_> = (0..3)
        .map(|i| {
            let out = format!("out={}", dir.path().join(i.to_string()).display());
            let args = [
                job.to_str().unwrap(),
                "--master",
                &service.addr,
                "--var",
                &data,
                "--var",
                &out,
            ];
            start_job(&args, &[])
        })
        .collect();
    for stdout in jobs.into_iter().map(finished) {
        let auc = result_value(&stdout, "holdout_auc");
        assert!(auc > 0.9, "holdout AUC {auc}:\n{stdout}");
        assert_eq!(result_value(&stdout, "max_difference"), 0.0, "{stdout}");
    }

    let out = Command::new(binary())
        .args(["status", "--master", &service.addr, "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = json_lines(&text);
    let rows = |name: &str, column: &str| -> Vec<(String, String)> {
        let table = lines
            .iter()
            .find(|l| l["kind"] == "table" && l["table"] == name);
        let rows = table.and_then(|t| t["rows"].as_array()).cloned();
        let rows = rows.unwrap_or_else(|| panic!("no table {name} in:\n{text}"));
        rows.iter()
            .map(|r| {
                let cell = |c: &str| r[c].as_str().unwrap_or_default().to_string();
                (cell("namespace"), cell(column))
            })
            .collect()
    };
    let matrices = rows("matrices", "matrix");
    let counters = rows("counters", "counter");
    let namespaces: HashSet<&str> = matrices.iter().map(|(ns, _)| ns.as_str()).collect();
    assert_eq!(namespaces.len(), 3, "three namespaces: {matrices:?}");
    for ns in namespaces {
        assert!(ns.starts_with("job-"), "named after the job file: {ns}");
        let mut models: Vec<&str> = matrices
            .iter()
            .filter(|(n, _)| n == ns)
            .map(|(_, m)| m.as_str())
            .collect();
        models.sort_unstable();
        assert_eq!(models, ["adult", "adult_loaded"], "{ns}: {matrices:?}");
        let counted: Vec<&str> = counters
            .iter()
            .filter(|(n, _)| n == ns)
            .map(|(_, c)| c.as_str())
            .collect();
        assert_eq!(counted, ["adult_features"], "{ns}: {counters:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_seen_in_its_namespace_and_elsewhere_only_when_qualified() {
    let cluster = Cluster::start(1);
    let client = |namespace: &str| {
        cluster.client_with(ClientConfig {
            namespace: namespace.to_string(),
            ..ClientConfig::default()
        })
    };
    let (a, b, root) = (client("a").await, client("b").await, client("").await);
    a.create_matrix(MatrixSpec::sparse("m", 1, 100))
        .await
        .unwrap();
    b.create_matrix(MatrixSpec::sparse("m", 1, 100))
        .await
        .unwrap();
    a.push_keys("m", 0, &[1], &[1.0f32]).await.unwrap();
    b.push_keys("m", 0, &[1], &[2.0f32]).await.unwrap();

    assert_eq!(pull(&a, "m").await.unwrap(), [1.0]);
    assert_eq!(pull(&b, "m").await.unwrap(), [2.0]);
    assert_eq!(
        pull(&b, "a/m").await.unwrap(),
        [1.0],
        "qualified on purpose"
    );
    assert_eq!(pull(&root, "b/m").await.unwrap(), [2.0]);

    // Dropping b's model leaves a's; a name only another namespace holds is not found, and
    // the error lists this namespace's names only.
    b.drop_matrix("m").await.unwrap();
    assert_eq!(pull(&a, "m").await.unwrap(), [1.0]);
    let err = pull(&b, "m").await.unwrap_err();
    expect(err, Code::NotFound, &["b/m"]);
    let err = root.matrix("m").await.unwrap_err().to_string();
    assert!(
        !err.contains("a/m"),
        "another namespace's name listed: {err}"
    );
}

/// Row 0, key 1 of matrix `name`, as `client` names it.
async fn pull(client: &PsClient, name: &str) -> Result<Vec<f32>, PsError> {
    client.pull_keys(name, 0, &[1]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_limited_to_namespaces_cannot_touch_another_teams_model() {
    let dir = tempfile::tempdir().unwrap();
    let (service_path, service_token) = token_file(dir.path());
    let (a_token, b_token) = ("a".repeat(40), "b".repeat(40));
    let teams = dir.path().join("teams");
    std::fs::write(
        &teams,
        format!("# namespaces  token\nteam-a {a_token}\nteam-b,shared {b_token}\n"),
    )
    .unwrap();
    let flags = [
        "--token-file",
        service_path.to_str().unwrap(),
        "--namespace-tokens",
        teams.to_str().unwrap(),
    ];
    let cluster = Cluster::start_flags(2, &flags, &flags);
    let client = |namespace: &str, token: &str| {
        cluster.client_with(ClientConfig {
            namespace: namespace.to_string(),
            token: Some(Token::new(token, "the test").unwrap()),
            ..ClientConfig::default()
        })
    };
    let a = client("team-a", &a_token).await;
    let b = client("team-b", &b_token).await;
    a.create_matrix(MatrixSpec::sparse("m", 1, 100))
        .await
        .unwrap();
    a.push_keys("m", 0, &[1], &[1.0f32]).await.unwrap();
    a.create_counter("c").await.unwrap();

    // Team b: refused by the master by name, and by the servers by matrix id; team a's
    // names are not even in its partition map or status.
    let denied = |e: PsError| expect(e, Code::PermissionDenied, &["team-b", "team-a/"]);
    denied(b.drop_matrix("team-a/m").await.unwrap_err());
    denied(b.describe("team-a/m").await.unwrap_err());
    denied(b.counter_seal("team-a/c", 1).await.unwrap_err());
    expect(pull(&b, "team-a/m").await.unwrap_err(), Code::NotFound, &[]);
    let status = b.status().await.unwrap();
    let names: Vec<String> = status
        .map
        .unwrap_or_default()
        .matrices
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert!(names.iter().all(|n| !n.starts_with("team-a/")), "{names:?}");
    let matrix = a.matrix("m").await.unwrap();
    let mut refused = Vec::new();
    for server in &cluster.servers {
        let channel = Channel::from_shared(format!("http://{}", server.addr)).unwrap();
        let credential = Credential::new(Some(&Token::new(&b_token, "the test").unwrap()));
        let mut raw = ServerClient::with_interceptor(channel.connect().await.unwrap(), credential);
        let push = push_one(matrix.meta.id, 1, 9.0);
        let code = raw.push(push).await.expect_err("team b's push").code();
        refused.push(code);
    }
    assert!(refused.contains(&Code::PermissionDenied), "{refused:?}");
    assert_eq!(pull(&a, "m").await.unwrap(), [1.0], "nothing changed");
    // Its own namespaces work; a name in none is refused.
    b.create_matrix(MatrixSpec::sparse("m", 1, 100))
        .await
        .unwrap();
    b.create_matrix(MatrixSpec::sparse("shared/m", 1, 100))
        .await
        .unwrap();
    let b_root = client("", &b_token).await;
    expect(
        b_root
            .create_matrix(MatrixSpec::sparse("loose", 1, 100))
            .await
            .unwrap_err(),
        Code::PermissionDenied,
        &["'loose'"],
    );
    // The service token names anything.
    let admin = client("", &service_token).await;
    admin.drop_matrix("team-a/m").await.unwrap();

    let alone = Command::new(binary())
        .args(["master", "--bind", "127.0.0.1:0", "--namespace-tokens"])
        .arg(&teams)
        .env_remove("ANGEL_TOKEN")
        .env_remove("ANGEL_TOKEN_FILE")
        .output()
        .unwrap();
    assert!(!alone.status.success());
    let said = String::from_utf8_lossy(&alone.stderr);
    assert!(said.contains("needs the service token"), "{said}");
}

/// GETs `url` with `token` as a bearer token (none: no header); the status and body.
async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let request = reqwest::Client::new().get(url);
    let request = match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_side_takes_the_same_tokens_and_shows_a_team_only_its_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let (service_path, service_token) = token_file(dir.path());
    let a_token = "a".repeat(40);
    let teams = dir.path().join("teams");
    std::fs::write(&teams, format!("team-a {a_token}\n")).unwrap();
    let flags = [
        "--token-file",
        service_path.to_str().unwrap(),
        "--namespace-tokens",
        teams.to_str().unwrap(),
    ];
    let master_flags = [&flags[..], &["--http", "127.0.0.1:0"]].concat();
    let cluster = Cluster::start_flags(1, &master_flags, &flags);
    let url = cluster
        .master
        .next_word(std::time::Duration::from_secs(10))
        .expect("the master prints its HTTP URL");
    let service = cluster
        .client_with(ClientConfig {
            token: Some(Token::new(&service_token, "the test").unwrap()),
            ..ClientConfig::default()
        })
        .await;
    for name in ["team-a/mine", "team-b/theirs"] {
        let spec = MatrixSpec::sparse(name, 1, 10);
        service.create_matrix(spec).await.unwrap();
    }

    let (code, page) = get(&url, None).await;
    assert!(
        code == 200 && page.contains("<html"),
        "the page itself asks for a token"
    );
    for path in ["api/status", "metrics"] {
        let (code, body) = get(&format!("{url}{path}"), None).await;
        assert!(
            code == 401 && body.contains("requires a token"),
            "{path}: {code} {body}"
        );
        let (code, _) = get(&format!("{url}{path}"), Some(&"0".repeat(64))).await;
        assert_eq!(code, 401, "{path} with a wrong token");
        let (code, body) = get(&format!("{url}{path}"), Some(&service_token)).await;
        assert_eq!(code, 200, "{path} with the service token: {body}");
    }
    let (code, body) = get(&format!("{url}metrics"), Some(&a_token)).await;
    assert!(
        code == 403 && body.contains("service token"),
        "{code} {body}"
    );
    let (code, body) = get(&format!("{url}api/status"), Some(&a_token)).await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("team-a/mine") && !body.contains("team-b"),
        "{body}"
    );

    // A wider address without a token is refused, as for gRPC.
    let mut master = Command::new(binary())
        .args(["master", "--bind", "127.0.0.1:0", "--http", "0.0.0.0:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let ended = loop {
        if let Some(status) = master.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            master.kill().unwrap();
            panic!("a master serving HTTP on 0.0.0.0 without a token started");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut master.stderr.take().unwrap(), &mut text).unwrap();
    assert!(
        !ended.success() && text.contains("without a token"),
        "{text}"
    );
}

/// A service token and tokens for teams `team-a` and `team-b`, written to files in `dir`: the
/// flags every node takes, then the service token and the two teams' tokens.
fn teams(dir: &std::path::Path) -> (Vec<String>, String, String, String) {
    let (service_path, service_token) = token_file(dir);
    let (a_token, b_token) = ("a".repeat(40), "b".repeat(40));
    let teams = dir.join("teams");
    std::fs::write(&teams, format!("team-a {a_token}\nteam-b {b_token}\n")).unwrap();
    let flags = [
        "--token-file".to_string(),
        service_path.display().to_string(),
        "--namespace-tokens".to_string(),
        teams.display().to_string(),
    ];
    (flags.to_vec(), service_token, a_token, b_token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_reports_replays_only_to_recoveries_of_its_own_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let (flags, service_token, a_token, b_token) = teams(dir.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let snapshots = dir.path().join("snapshots");
    let snapshots = ["--snapshot-dir", snapshots.to_str().unwrap()];
    let master_flags = [&flags[..], &snapshots].concat();
    let mut cluster = Cluster::start_flags(2, &master_flags, &flags);
    let service = cluster
        .client_with(ClientConfig {
            token: Some(Token::new(&service_token, "the test").unwrap()),
            ..ClientConfig::default()
        })
        .await;
    service
        .create_matrix(MatrixSpec::sparse("team-a/m", 1, 100))
        .await
        .unwrap();
    let status = service.status().await.unwrap();
    let dead = &cluster.servers[1].addr;
    let dead = status
        .servers
        .iter()
        .find(|s| &s.addr == dead)
        .unwrap()
        .server_id;
    cluster.servers[1].kill();
    service
        .pull_keys::<f32>("team-a/m", 0, &[1, 99])
        .await
        .unwrap();

    let report = |token: &str, lost: u64| {
        let addr = format!("http://{}", cluster.master.addr);
        let token = Token::new(token, "the test").unwrap();
        async move {
            let channel = Channel::from_shared(addr).unwrap().connect().await.unwrap();
            let mut master = angel_proto::master_client::MasterClient::with_interceptor(
                channel,
                Credential::new(Some(&token)),
            );
            let report = angel_proto::ReplayReport {
                server_id: dead,
                replayed: 0,
                lost,
            };
            master.report_replay(report).await.map(drop)
        }
    };
    let refused = report(&b_token, 5).await.expect_err("team b's report");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let refused = report(&a_token, 1_000_000_000_000_000)
        .await
        .expect_err("10^15 lost");
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    report(&a_token, 2).await.unwrap();
    let recovery = service.status().await.unwrap().recoveries.remove(0);
    assert_eq!(recovery.changes_lost, 2, "{recovery:?}");
    assert_eq!(recovery.namespaces, ["team-a"], "{recovery:?}");
}

/// A recovery of a server both teams used: a team's reports of lost changes count in its own
/// tally, never in the other team's view, and the loss's error a team's token is told names
/// no matrix of the other team.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_recovery_keeps_each_teams_counts_and_names_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (flags, service_token, a_token, b_token) = teams(dir.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut cluster = Cluster::start_flags(2, &flags, &flags);
    let addr = cluster.master.addr.clone();
    let client = |token: &str| {
        let config = ClientConfig {
            token: Some(Token::new(token, "the test").unwrap()),
            ..ClientConfig::default()
        };
        let addr = addr.clone();
        async move { PsClient::connect_with(&addr, config).await.unwrap() }
    };
    let service = client(&service_token).await;
    for name in ["team-a/m", "team-b/m"] {
        (service
            .create_matrix(MatrixSpec::sparse(name, 1, 100))
            .await)
            .unwrap();
    }
    let dead = &cluster.servers[1].addr;
    let status = service.status().await.unwrap();
    let dead = (status.servers.iter())
        .find(|s| &s.addr == dead)
        .unwrap()
        .server_id;
    cluster.servers[1].kill();
    let master = |token: &str| {
        let addr = format!("http://{addr}");
        let token = Token::new(token, "the test").unwrap();
        async move {
            let channel = Channel::from_shared(addr).unwrap().connect().await.unwrap();
            angel_proto::master_client::MasterClient::with_interceptor(
                channel,
                Credential::new(Some(&token)),
            )
        }
    };
    // Without snapshots the dead server's partitions are lost: team b hears that, not which.
    let unreachable = angel_proto::ReportUnreachableRequest {
        server_id: dead,
        error: "connection refused".into(),
    };
    let lost = (master(&b_token)
        .await
        .report_unreachable(unreachable.clone())
        .await)
        .expect_err("the partitions are lost");
    assert_eq!(lost.code(), Code::DataLoss, "{lost:?}");
    assert!(!lost.message().contains("team-a"), "{lost:?}");
    let full = (master(&service_token)
        .await
        .report_unreachable(unreachable)
        .await)
        .expect_err("the partitions are lost");
    assert!(
        full.message().contains("team-a/m"),
        "the service token's names all: {full:?}"
    );
    let report = angel_proto::ReplayReport {
        server_id: dead,
        replayed: 0,
        lost: 7,
    };
    master(&a_token).await.report_replay(report).await.unwrap();
    let recovery = |client: std::sync::Arc<PsClient>| async move {
        client.status().await.unwrap().recoveries.remove(0)
    };
    let seen_by_b = recovery(client(&b_token).await).await;
    assert_eq!(seen_by_b.changes_lost, 0, "{seen_by_b:?}");
    assert!(seen_by_b.by_namespace.is_empty(), "{seen_by_b:?}");
    let seen_by_a = recovery(client(&a_token).await).await;
    assert_eq!(seen_by_a.changes_lost, 7, "{seen_by_a:?}");
    let seen_by_service = recovery(service).await;
    assert_eq!(seen_by_service.changes_lost, 7, "{seen_by_service:?}");
    let tally = &seen_by_service.by_namespace;
    assert!(
        tally.len() == 1 && tally[0].namespace == "team-a",
        "{tally:?}"
    );
}

/// Quotas per namespace: team b's token reaches its dense-memory and object quotas and is
/// refused (RESOURCE_EXHAUSTED naming the quota's flag) without anything being created; team a
/// creates as before; a drop frees room.
#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_past_its_quota_is_refused_and_the_others_are_not_starved() {
    let dir = tempfile::tempdir().unwrap();
    let (flags, _, a_token, b_token) = teams(dir.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let quotas = ["--namespace-max-objects", "3", "--namespace-memory", "4000"];
    let cluster = Cluster::start_flags(1, &[&flags[..], &quotas].concat(), &flags);
    let client = |namespace: &str, token: &str| {
        cluster.client_with(ClientConfig {
            namespace: namespace.to_string(),
            token: Some(Token::new(token, "the test").unwrap()),
            ..ClientConfig::default()
        })
    };
    let (a, b) = (
        client("team-a", &a_token).await,
        client("team-b", &b_token).await,
    );

    // 1 x 2,000 f32 is 8,000 bytes; 1 x 1,000 fills the 4,000 exactly.
    let big = b.create_matrix(MatrixSpec::dense("big", 1, 2000)).await;
    let flag = ["namespace 'team-b'", "--namespace-memory 4000"];
    expect(big.unwrap_err(), Code::ResourceExhausted, &flag);
    create_w_and_s(&b).await;
    b.create_counter("c").await.unwrap();
    let fourth = b.create_matrix(MatrixSpec::sparse("t", 1, 10)).await;
    let flag = ["holds 3 matrices and counters", "--namespace-max-objects 3"];
    expect(fourth.unwrap_err(), Code::ResourceExhausted, &flag);
    expect(
        b.create_counter("d").await.unwrap_err(),
        Code::ResourceExhausted,
        &flag,
    );
    let status = b.status().await.unwrap();
    let mut names: Vec<String> = status
        .map
        .unwrap_or_default()
        .matrices
        .into_iter()
        .map(|m| m.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["team-b/s", "team-b/w"],
        "nothing made by a refused create"
    );

    create_w_and_s(&a).await;
    b.drop_matrix("s").await.unwrap();
    b.create_matrix(MatrixSpec::sparse("t", 1, 10))
        .await
        .unwrap();
}

/// Creates `w` (1 x 1,000 f32: 4,000 bytes, a namespace's whole memory quota here) and a
/// small sparse `s` in `client`'s namespace.
async fn create_w_and_s(client: &PsClient) {
    client
        .create_matrix(MatrixSpec::dense("w", 1, 1000))
        .await
        .unwrap();
    client
        .create_matrix(MatrixSpec::sparse("s", 1, 10))
        .await
        .unwrap();
}

/// A job that failed after sealing its counter (as a killed one would), run again in the same
/// namespace, finishes, and its counter holds one run's counts: a job starts each counter it
/// counts into afresh.
#[test]
fn a_job_run_again_in_its_namespace_starts_its_counters_afresh() {
    let node = spawn(&["standalone", "--servers", "1", "--bind", "127.0.0.1:0"]);
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("count.sql");
    std::fs::write(
        &job,
        "SELECT ps_counter_add('seen', make_array('a', 'b', 'a')) AS counted;\n\
         SELECT ps_counter_seal('seen', 2) AS indexed;\n\
         SELECT ${then} AS then;\n",
    )
    .unwrap();
    let run = |then: &str| {
        let var = format!("then={then}");
        let args = ["--master", &node.addr, "--namespace", "fixed"];
        angel_tests::run_job(
            &[&args[..], &[job.to_str().unwrap(), "--var", &var]].concat(),
            &[],
        )
        .1
    };
    let failed = run("no_such_column");
    assert!(
        !failed.status.success(),
        "the first run fails after its seal"
    );
    let again = run("1");
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&again.stderr)
    );
    // Only 'a' was counted twice in one run; with both runs' counts 'b' would be too.
    assert_eq!(result_value(&stdout, "indexed"), 1.0, "{stdout}");
}

/// `angel-ps drop NAMESPACE` removes what a killed job left in its namespace, counters in any
/// state included, and nothing of another namespace.
#[tokio::test(flavor = "multi_thread")]
async fn drop_removes_a_namespaces_matrices_and_counters_and_nothing_else() {
    let node = spawn(&["standalone", "--servers", "1", "--bind", "127.0.0.1:0"]);
    let c = PsClient::connect(&node.addr).await.unwrap();
    for name in ["gone/w", "kept/w"] {
        c.create_matrix(MatrixSpec::sparse(name, 1, 10))
            .await
            .unwrap();
    }
    for name in ["gone/sealed", "gone/counting", "kept/c"] {
        c.create_counter(name).await.unwrap();
    }
    c.counter_seal("gone/sealed", 1).await.unwrap();
    let stdout = angel_tests::stdout_of(
        Command::new(binary()).args(["drop", "--master", &node.addr, "gone"]),
    );
    assert!(
        stdout.contains("dropped 1 matrices and 2 counters"),
        "{stdout}"
    );
    let map = c.status().await.unwrap().map.unwrap_or_default();
    let matrices: Vec<String> = map.matrices.into_iter().map(|m| m.name).collect();
    let counters: Vec<String> = map.counters.into_iter().map(|c| c.name).collect();
    assert_eq!(matrices, ["kept/w"]);
    assert_eq!(counters, ["kept/c"]);
    // The name is free again.
    c.create_counter("gone/counting").await.unwrap();
}

/// `angel-ps drop` with a token limited to other namespaces fails naming them, rather than
/// report that it found nothing to drop, and the namespace keeps its matrices.
#[tokio::test(flavor = "multi_thread")]
async fn drop_of_another_teams_namespace_fails_naming_the_tokens_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let (service_path, service_token) = token_file(dir.path());
    let a_token = "a".repeat(40);
    let (teams, a_path) = (dir.path().join("teams"), dir.path().join("a.token"));
    std::fs::write(&teams, format!("team-a {a_token}\n")).unwrap();
    std::fs::write(&a_path, format!("{a_token}\n")).unwrap();
    let (service, teams) = (service_path.to_str().unwrap(), teams.to_str().unwrap());
    let node = spawn(&[
        "standalone",
        "--servers",
        "1",
        "--bind",
        "127.0.0.1:0",
        "--token-file",
        service,
        "--namespace-tokens",
        teams,
    ]);
    let config = ClientConfig {
        token: Some(Token::new(&service_token, "the test").unwrap()),
        ..ClientConfig::default()
    };
    let root = PsClient::connect_with(&node.addr, config).await.unwrap();
    (root
        .create_matrix(MatrixSpec::sparse("team-b/w", 1, 10))
        .await)
        .unwrap();
    let out = Command::new(binary())
        .args(["drop", "--master", &node.addr, "--token-file"])
        .args([a_path.to_str().unwrap(), "team-b"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("limited to the namespaces team-a") && stderr.contains("'team-b'"),
        "{stderr}"
    );
    root.describe("team-b/w")
        .await
        .expect("team b's matrix stays");
}

/// A server's peak and current resident set, in bytes, as the kernel reports them.
fn resident(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |field: &str| {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    };
    (kib("VmHWM:"), kib("VmRSS:"))
}

/// A sparse-push flood from a namespace token (finding 1 of round 4: it took a server with a
/// 256 MiB budget to 2.9 GB): every server refuses it at its namespace's share of the memory
/// budget with RESOURCE_EXHAUSTED naming the matrix, the namespace and the share; the kernel's
/// peak resident set of each server stays within its budget over what it started with; every
/// accepted push is kept, and the service token's matrices take pushes after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sparse_push_flood_from_a_namespace_token_leaves_every_server_under_its_budget() {
    const BUDGET: u64 = 64 << 20;
    let dir = tempfile::tempdir().unwrap();
    let (flags, service_token, _, b_token) = teams(dir.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let budget = BUDGET.to_string();
    let server_flags = [&flags[..], &["--memory-budget", &budget]].concat();
    let cluster = Cluster::start_flags(2, &flags, &server_flags);
    let start: Vec<u64> = (cluster.servers.iter())
        .map(|s| resident(s.pid()).1)
        .collect();
    let client = |namespace: &str, token: &str| {
        cluster.client_with(ClientConfig {
            namespace: namespace.to_string(),
            token: Some(Token::new(token, "the test").unwrap()),
            ..ClientConfig::default()
        })
    };
    let (service, b) = (
        client("", &service_token).await,
        client("team-b", &b_token).await,
    );
    service
        .create_matrix(MatrixSpec::sparse("shared", 1, 1 << 40))
        .await
        .unwrap();
    b.create_matrix(MatrixSpec::sparse("flood", 1, 1 << 40))
        .await
        .unwrap();
    // Keys spread over the whole key space, so over every partition of both servers.
    let key = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 24;
    let (batch, mut sent, mut refused) = (50_000u64, 0u64, None);
    for round in 0..200u64 {
        let keys: Vec<u64> = (round * batch..(round + 1) * batch).map(key).collect();
        match b
            .push_keys("flood", 0, &keys, &vec![1.0f32; keys.len()])
            .await
        {
            Ok(()) => sent += batch,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let err = refused.expect("10 million keys were taken under two budgets of 64 MiB");
    let words = [
        "matrix 'team-b/flood'",
        "namespace 'team-b'",
        "--namespace-memory-share",
    ];
    expect(err, Code::ResourceExhausted, &words);
    for (s, start) in cluster.servers.iter().zip(&start) {
        let (peak, _) = resident(s.pid());
        println!(
            "server {}: {sent} keys accepted, peak resident {} MiB, {} MiB at start, budget {} MiB",
            s.addr,
            peak >> 20,
            start >> 20,
            BUDGET >> 20
        );
        assert!(
            peak <= start + BUDGET,
            "peak {peak} bytes, {start} at start"
        );
    }
    assert!(
        sent >= 500_000,
        "refused after {sent} keys: the bound is too loose"
    );
    let accepted: Vec<u64> = (0..sent).step_by(97).map(key).collect();
    let back: Vec<f32> = b.pull_keys("flood", 0, &accepted).await.unwrap();
    assert!(back.iter().all(|&v| v == 1.0), "an accepted push was lost");
    service
        .push_keys("shared", 0, &[1, 2, 3], &[1.0f32; 3])
        .await
        .unwrap();
}
