//! The user-defined `clip` function, registered on real in-process servers and called
//! through the client over real sockets.

use angel_client::{MatrixSpec, PsClient, PsError, ValueType};
use angel_examples::clip::Clip;
use angel_ps_service::{Functions, Standalone, StandaloneConfig};

#[tokio::test]
async fn clip_runs_on_the_servers_and_matches_a_local_clamp() {
    let mut functions = Functions::default();
    functions.psfs.register(Clip);
    let service = Standalone::start(StandaloneConfig {
        functions,
        ..StandaloneConfig::new(2)
    })
    .await
    .unwrap();
    let client = PsClient::connect(&service.master_addr()).await.unwrap();
    client
        .create_matrix(MatrixSpec::dense("w", 1, 500).value_type(ValueType::F64))
        .await
        .unwrap();
    let row: Vec<f64> = (0..500).map(|i| (i as f64 - 250.0) / 100.0).collect();
    client.push_row("w", 0, &row).await.unwrap();

    let changed = client.psf("clip", &[("w", 0)], &[-1.0, 1.5]).await.unwrap();
    let local: Vec<f64> = row.iter().map(|v| v.clamp(-1.0, 1.5)).collect();
    let expected_changed = row.iter().zip(&local).filter(|(a, b)| a != b).count();
    assert_eq!(changed, vec![expected_changed as f64]);
    assert_eq!(client.pull_rows::<f64>("w", &[0]).await.unwrap()[0], local);

    let err = client
        .psf("clip", &[("w", 0)], &[2.0, 1.0])
        .await
        .unwrap_err();
    assert!(
        matches!(err, PsError::InvalidArgument(ref m) if m.contains("low 2")),
        "{err}"
    );
    service.shutdown().await.unwrap();
}
