//! `compression_mode = 'auto'`: a client compresses its pushes only while compressed pushes
//! measure faster, over a slow link (a token-bucket proxy in front of every server) and on
//! loopback.

use angel_bench::link::SlowService;
use angel_client::{MatrixSpec, PsClient, PushOptions};
use angel_tests::Cluster;

/// Pushes to one model in the test.
const PUSHES: usize = 48;
/// Keys per push: a mini-batch's worth of compact counter indices.
const KEYS: u64 = 20_000;

/// Pushes [`PUSHES`] gradients to a SketchML matrix under `mode` and returns the share of
/// slices the servers received compressed.
async fn compressed_share(client: &PsClient, name: &str, mode: &str) -> f64 {
    let spec = MatrixSpec::sparse(name, 1, 500_000).training(angel_client::Training {
        compression: "sketchml".into(),
        compression_mode: mode.into(),
        ..Default::default()
    });
    let m = client.create_matrix(spec).await.unwrap();
    let mut seed = 7u64;
    for push in 0..PUSHES {
        let keys: Vec<u64> = (0..KEYS)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) % 500_000
            })
            .collect();
        let values: Vec<f32> = (0..KEYS)
            .map(|i| ((i + push as u64) % 101) as f32 * 1e-4 - 5e-3)
            .collect();
        client
            .push_with(name, &[0], &keys, &values, PushOptions::default())
            .await
            .unwrap();
    }
    let status = client.status().await.unwrap();
    let ours = angel_proto::pushes::totals(&status);
    let ours = ours.iter().filter(|p| p.matrix_id == m.meta.id);
    let (slices, compressed) =
        ours.fold((0, 0), |(s, c), p| (s + p.slices, c + p.compressed_slices));
    assert!(slices > 0, "the servers counted no slices of '{name}'");
    compressed as f64 / slices as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_slow_link_auto_compresses_almost_every_push() {
    // 16 Mbit/s: a raw push of 20,000 pairs (240 kB) takes about 120 ms on the wire, a
    // compressed one (about 40 kB) 20 ms plus encoding, even in a debug build.
    let slow = SlowService::start(2, 16.0).await.unwrap();
    let client = PsClient::connect(&slow.master_addr()).await.unwrap();
    let share = compressed_share(&client, "slow_auto", "auto").await;
    let always = compressed_share(&client, "slow_always", "always").await;
    eprintln!("compressed slices over 16 Mbit/s: auto {share:.2}, always {always:.2}");
    slow.shutdown().await.unwrap();
    assert_eq!(always, 1.0, "'always' compresses every push of this size");
    // The warm-up sends 4 of the first 8 pushes raw and one in 16 probes raw afterwards.
    assert!(
        share >= 0.75,
        "only {share:.2} of the slices went compressed over a slow link"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_loopback_auto_still_measures_both_forms() {
    let cluster = Cluster::start(2);
    let client = cluster.client().await;
    let share = compressed_share(&client, "loopback_auto", "auto").await;
    eprintln!("compressed slices on loopback: auto {share:.2}");
    // Whichever form wins here, the warm-up and the probes send some pushes each way.
    assert!(share > 0.0 && share < 1.0, "compressed share {share}");
}
