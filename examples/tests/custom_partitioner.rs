//! A user-defined partitioner registered on a real in-process master; and a broken one,
//! whose blocks do not tile the matrix, rejected by name.

use std::sync::Arc;

use angel_client::{MatrixSpec, PsClient, PsError, Result};
use angel_examples::row_partitioner::PerRow;
use angel_proto::CreateMatrixRequest;
use angel_ps_service::master::{BlockRange, Partitioner};
use angel_ps_service::{Standalone, StandaloneConfig};

/// Leaves the last column uncovered.
struct Gappy;

impl Partitioner for Gappy {
    fn name(&self) -> &str {
        "gappy"
    }

    fn partition(&self, r: &CreateMatrixRequest, _servers: usize) -> Result<Vec<BlockRange>> {
        Ok(vec![BlockRange {
            rows: 0..r.rows,
            cols: 0..r.cols - 1,
        }])
    }
}

#[tokio::test]
async fn user_partitioners_are_selected_by_name_and_checked() {
    let service = Standalone::start(StandaloneConfig {
        partitioners: vec![Arc::new(PerRow), Arc::new(Gappy)],
        ..StandaloneConfig::new(2)
    })
    .await
    .unwrap();
    let client = PsClient::connect(&service.master_addr()).await.unwrap();

    let m = client
        .create_matrix(MatrixSpec::dense("segments", 5, 40).partitioner("per_row"))
        .await
        .unwrap();
    assert_eq!(m.meta.partitioner, "per_row");
    assert_eq!(m.meta.partitions.len(), 5);
    assert!(
        m.meta
            .partitions
            .iter()
            .all(|p| p.row_end - p.row_start == 1 && p.col_end == 40)
    );
    let row: Vec<f32> = (0..40).map(|i| i as f32).collect();
    client.push_row("segments", 3, &row).await.unwrap();
    assert_eq!(
        client.pull_rows::<f32>("segments", &[3]).await.unwrap()[0],
        row
    );

    let err = client
        .create_matrix(MatrixSpec::dense("bad", 2, 10).partitioner("gappy"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, PsError::InvalidArgument(ref m) if m.contains("'gappy'")),
        "{err}"
    );
    let err = client
        .create_matrix(MatrixSpec::dense("bad", 2, 10).partitioner("nope"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, PsError::NotFound(ref m) if m.contains("'nope'") && m.contains("per_row")),
        "{err}"
    );
    service.shutdown().await.unwrap();
}
