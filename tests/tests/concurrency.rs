//! Many clients pushing to the same partitions at once never lose an update.

use angel_client::{MatrixSpec, ValueType};
use angel_tests::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_pushing_overlapping_keys_lose_nothing() {
    let cluster = Cluster::start(2);
    let setup = cluster.client().await;
    setup
        .create_matrix(MatrixSpec::sparse("hot", 1, 1 << 30).value_type(ValueType::F64))
        .await
        .unwrap();
    setup
        .create_matrix(MatrixSpec::dense("hot_dense", 1, 64).value_type(ValueType::I64))
        .await
        .unwrap();
    let keys: Vec<u64> = (0..64).map(|i| i * (1 << 24) + 1).collect();
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        // Half the tasks get a client of their own, half share one: both paths must be safe.
        let client = if t % 2 == 0 {
            cluster.client().await
        } else {
            setup.clone()
        };
        let keys = keys.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..1000u64 {
                let k = [
                    keys[(round % 64) as usize],
                    keys[((round + t) % 64) as usize],
                ];
                client
                    .push_keys("hot", 0, &k, &[1.0f64, t as f64])
                    .await
                    .unwrap();
                let dense_keys = [round % 64, (round * 7 + t) % 64];
                client
                    .push_keys("hot_dense", 0, &dense_keys, &[1i64, 2])
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut want = vec![0.0f64; 64];
    let mut want_dense = vec![0i64; 64];
    for t in 0..8u64 {
        for round in 0..1000u64 {
            want[(round % 64) as usize] += 1.0;
            want[((round + t) % 64) as usize] += t as f64;
            want_dense[(round % 64) as usize] += 1;
            want_dense[((round * 7 + t) % 64) as usize] += 2;
        }
    }
    let got: Vec<f64> = setup.pull_keys("hot", 0, &keys).await.unwrap();
    assert_eq!(got, want);
    let got: Vec<Vec<i64>> = setup.pull_rows("hot_dense", &[0]).await.unwrap();
    assert_eq!(got[0], want_dense);
}
