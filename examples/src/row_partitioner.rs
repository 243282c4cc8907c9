//! `per_row`: a user-defined partitioner that gives every row a block of its own.
//!
//! Useful when rows are independent models (one per user segment, say) that are pulled whole:
//! each pull then touches one partition. Register it on the master; clients select it by name
//! with `MatrixSpec::partitioner("per_row")`.

use angel_proto::{CreateMatrixRequest, Result};
use angel_ps_service::master::{BlockRange, Partitioner};

/// One block per row, covering all columns.
pub struct PerRow;

impl Partitioner for PerRow {
    fn name(&self) -> &str {
        "per_row"
    }

    fn partition(&self, request: &CreateMatrixRequest, _servers: usize) -> Result<Vec<BlockRange>> {
        Ok((0..request.rows)
            .map(|r| BlockRange {
                rows: r..r + 1,
                cols: 0..request.cols,
            })
            .collect())
    }
}
