//! The distributed counter through real processes: exact counts, exact min_count filtering,
//! indices that do not depend on servers or on how the counting was split, and wrong-state
//! calls rejected.

use std::collections::BTreeMap;

use angel_client::{PsClient, PsError};
use angel_tests::Cluster;
use tonic::Code;

/// Feature-like keys with skewed counts: key i appears (i % 7) + 1 times.
fn occurrences() -> Vec<String> {
    let mut keys = Vec::new();
    for i in 0..3000u32 {
        for _ in 0..(i % 7) + 1 {
            keys.push(format!("f{}={}", i % 13, i));
        }
    }
    keys
}

/// Counts `keys` into a new counter with `tasks` concurrent clients, each taking every
/// `tasks`-th key, seals with `min_count` and returns key -> (count, index).
async fn index_with(
    cluster: &Cluster,
    tasks: usize,
    min_count: i64,
) -> BTreeMap<String, (i64, Option<u64>)> {
    let keys = occurrences();
    let setup = cluster.client().await;
    setup.create_counter("features").await.unwrap();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let client = cluster.client().await;
        let mine: Vec<String> = keys.iter().skip(t).step_by(tasks).cloned().collect();
        handles.push(tokio::spawn(async move {
            for batch in mine.chunks(500) {
                client
                    .counter_increase("features", batch, &vec![1; batch.len()])
                    .await
                    .unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let sealed = setup.counter_seal("features", min_count).await.unwrap();
    let distinct: Vec<String> = {
        let mut d = keys.clone();
        d.sort();
        d.dedup();
        d
    };
    let got = setup.counter_get("features", &distinct).await.unwrap();
    let indexed = got.iter().filter(|(_, i)| i.is_some()).count() as u64;
    assert_eq!(
        sealed.meta.size, indexed,
        "size is the number of indexed keys"
    );
    distinct.into_iter().zip(got).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indices_are_compact_exact_and_independent_of_servers_and_tasks() {
    let mut runs = Vec::new();
    for (servers, tasks) in [(1, 1), (2, 4), (3, 3)] {
        let cluster = Cluster::start(servers);
        runs.push(index_with(&cluster, tasks, 3).await);
    }
    let first = &runs[0];
    for key in occurrences() {
        let i: u32 = key.split('=').nth(1).unwrap().parse().unwrap();
        let count = i64::from(i % 7) + 1;
        let (got_count, index) = first[&key];
        assert_eq!(got_count, count, "count of {key}");
        assert_eq!(index.is_some(), count >= 3, "min_count filter for {key}");
    }
    let mut indices: Vec<u64> = first.values().filter_map(|(_, i)| *i).collect();
    indices.sort_unstable();
    assert!(
        indices.iter().enumerate().all(|(n, &i)| n as u64 == i),
        "indices are 0..n-1"
    );
    assert_eq!(&runs[1], first, "2 servers, 4 tasks give the same indices");
    assert_eq!(&runs[2], first, "3 servers, 3 tasks give the same indices");
}

fn expect(err: PsError, code: Code, words: &[&str]) {
    assert_eq!(err.code(), code, "{err}");
    for w in words {
        assert!(err.to_string().contains(w), "'{err}' should mention '{w}'");
    }
}

#[tokio::test]
async fn wrong_state_calls_are_rejected_and_change_nothing() {
    let cluster = Cluster::start(2);
    let c: std::sync::Arc<PsClient> = cluster.client().await;
    expect(
        c.counter_get("nope", &["a"]).await.unwrap_err(),
        Code::NotFound,
        &["'nope'"],
    );
    c.create_counter("c").await.unwrap();
    expect(
        c.create_counter("c").await.unwrap_err(),
        Code::AlreadyExists,
        &["'c'"],
    );
    c.counter_increase("c", &["a", "b", "a"], &[1, 1, 1])
        .await
        .unwrap();
    expect(
        c.counter_get("c", &["a"]).await.unwrap_err(),
        Code::FailedPrecondition,
        &["'c'", "not sealed"],
    );
    expect(
        c.counter_increase("c", &["a"], &[1, 2]).await.unwrap_err(),
        Code::InvalidArgument,
        &["1 keys but 2 deltas"],
    );
    let sealed = c.counter_seal("c", 1).await.unwrap();
    assert_eq!(sealed.meta.size, 2);
    expect(
        c.counter_increase("c", &["a"], &[1]).await.unwrap_err(),
        Code::FailedPrecondition,
        &["'c'", "WRITE"],
    );
    expect(
        c.counter_seal("c", 1).await.unwrap_err(),
        Code::FailedPrecondition,
        &[
            "counter 'c' is sealed",
            "seal needs a counter that is still counting",
        ],
    );
    expect(
        c.counter_seal("c", -1).await.unwrap_err(),
        Code::InvalidArgument,
        &["counter 'c'", "min_count must be 1 or more, got -1"],
    );
    let got = c.counter_get("c", &["a", "b", "zzz"]).await.unwrap();
    assert_eq!(
        (got[0].0, got[1].0, got[2]),
        (2, 1, (0, None)),
        "rejected calls changed nothing"
    );
    c.counter_clean("c").await.unwrap();
    expect(
        c.counter_get("c", &["a"]).await.unwrap_err(),
        Code::FailedPrecondition,
        &["'c'", "cleaned"],
    );
    expect(
        c.counter_clean("c").await.unwrap_err(),
        Code::FailedPrecondition,
        &["counter 'c' is cleaned up", "clean needs"],
    );
    let status = c.status().await.unwrap();
    let counter_id = c.counter("c").await.unwrap().meta.id;
    let left: u64 = status
        .servers
        .iter()
        .flat_map(|s| &s.partitions)
        .filter(|p| p.matrix_id == counter_id)
        .map(|p| p.elements)
        .sum();
    assert_eq!(left, 0, "cleaning frees the keys on the servers");
}
