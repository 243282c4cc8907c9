//! Dense and sparse round trips through real processes, for every value type.

use angel_client::{MatrixSpec, ValueType};
use angel_tests::Cluster;

#[tokio::test]
async fn dense_rows_round_trip_for_every_value_type() {
    let cluster = Cluster::start(2);
    let client = cluster.client().await;
    client
        .create_matrix(MatrixSpec::dense("f32", 3, 1000))
        .await
        .unwrap();
    let row: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    client.push_row("f32", 1, &row).await.unwrap();
    client.push_row("f32", 1, &row).await.unwrap();
    let rows: Vec<Vec<f32>> = client.pull_rows("f32", &[1, 0]).await.unwrap();
    assert_eq!(rows[0], row.iter().map(|x| 2.0 * x).collect::<Vec<_>>());
    assert!(rows[1].iter().all(|&x| x == 0.0));

    client
        .create_matrix(MatrixSpec::dense("f64", 1, 77).value_type(ValueType::F64))
        .await
        .unwrap();
    client
        .push_keys("f64", 0, &[3, 76], &[1.25f64, -8.0])
        .await
        .unwrap();
    let back: Vec<f64> = client.pull_keys("f64", 0, &[76, 3, 4]).await.unwrap();
    assert_eq!(back, vec![-8.0, 1.25, 0.0]);

    client
        .create_matrix(MatrixSpec::dense("i64", 1, 10).value_type(ValueType::I64))
        .await
        .unwrap();
    client
        .push_keys("i64", 0, &[9, 9, 0], &[5i64, 6, -1])
        .await
        .unwrap();
    let back: Vec<i64> = client.pull_keys("i64", 0, &[9, 0]).await.unwrap();
    assert_eq!(back, vec![11, -1]);
}

#[tokio::test]
async fn sparse_pulls_are_pruned_deduplicated_and_in_request_order() {
    let cluster = Cluster::start(2);
    let client = cluster.client().await;
    let cols = 1u64 << 63;
    let m = client
        .create_matrix(MatrixSpec::sparse("w", 1, cols))
        .await
        .unwrap();
    assert!(
        m.meta.partitions.len() >= 8,
        "4 partitions per server at least"
    );
    let keys = [cols - 1, 0, 12345, cols / 2, 12345];
    client
        .push_keys("w", 0, &keys, &[1.0f32, 2.0, 3.0, 4.0, 5.0])
        .await
        .unwrap();
    let back: Vec<f32> = client
        .pull_keys("w", 0, &[12345, cols - 1, 7, 12345, cols / 2, 0])
        .await
        .unwrap();
    assert_eq!(back, vec![8.0, 1.0, 0.0, 8.0, 4.0, 2.0]);
    let nnz = client.psf("nnz", &[("w", 0)], &[]).await.unwrap();
    assert_eq!(nnz, vec![4.0], "only the four pushed keys are stored");
}

#[tokio::test]
async fn two_dimensional_blocks_route_rows_and_columns() {
    let cluster = Cluster::start(2);
    let client = cluster.client().await;
    let m = client
        .create_matrix(MatrixSpec::sparse("grid", 6, 100).block_shape(2, 30))
        .await
        .unwrap();
    assert_eq!(m.meta.partitions.len(), 3 * 4);
    for row in 0..6u64 {
        let keys: Vec<u64> = (0..100).step_by(7).collect();
        let values: Vec<f32> = keys.iter().map(|&k| (row * 1000 + k) as f32).collect();
        client.push_keys("grid", row, &keys, &values).await.unwrap();
    }
    let rows: Vec<Vec<f32>> = client.pull_rows("grid", &[5, 2]).await.unwrap();
    for (row, values) in [5u64, 2].iter().zip(&rows) {
        for (k, &v) in values.iter().enumerate() {
            let want = if k % 7 == 0 {
                (row * 1000 + k as u64) as f32
            } else {
                0.0
            };
            assert_eq!(v, want, "row {row} col {k}");
        }
    }
    let status = client.status().await.unwrap();
    let parts: usize = status.servers.iter().map(|s| s.partitions.len()).sum();
    assert_eq!(parts, 12);
    assert!(status.servers.iter().all(|s| s.reachable));
}

#[tokio::test]
async fn dropped_matrices_free_their_partitions_and_names() {
    let cluster = Cluster::start(1);
    let client = cluster.client().await;
    client
        .create_matrix(MatrixSpec::dense("tmp", 1, 10))
        .await
        .unwrap();
    let before = client.map_epoch();
    client.drop_matrix("tmp").await.unwrap();
    assert!(
        client.map_epoch() > before,
        "the map epoch moves on every change"
    );
    let status = client.status().await.unwrap();
    assert!(status.servers[0].partitions.is_empty());
    client
        .create_matrix(MatrixSpec::dense("tmp", 1, 10))
        .await
        .unwrap();
}
