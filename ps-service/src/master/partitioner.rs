//! Cutting a matrix into rectangular blocks.

use std::ops::Range;

use angel_proto::{CreateMatrixRequest, PsError, Result};

/// Largest number of blocks one matrix may have.
pub const MAX_BLOCKS: u64 = 1 << 16;

/// One block: rows x columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRange {
    /// Rows of the block.
    pub rows: Range<u64>,
    /// Columns of the block.
    pub cols: Range<u64>,
}

/// Decides the blocks of a new matrix. Blocks must tile the matrix in row bands (blocks of a
/// band share their rows and split its columns); the master checks this and rejects output
/// that does not. Register user partitioners on the master by name.
pub trait Partitioner: Send + Sync + 'static {
    /// The name a create request selects it by.
    fn name(&self) -> &str;
    /// The blocks of the matrix described by `request`, for `servers` servers.
    fn partition(&self, request: &CreateMatrixRequest, servers: usize) -> Result<Vec<BlockRange>>;
}

/// The default: `parts_per_server` equal blocks per server (fewer if the matrix is too small).
/// A matrix with fewer rows than blocks keeps every row in each block and splits columns, so
/// its rows (a model and its optimizer state, say) sit together and PS functions can combine
/// them; a taller one is split by rows. `block_rows` / `block_cols` in the request override
/// this with a grid; `block_rows` covering every row alone keeps the rows together at any
/// height and splits columns as for a short matrix.
#[derive(Debug, Clone)]
pub struct RangePartitioner {
    /// Target number of blocks per server.
    pub parts_per_server: u64,
}

impl Default for RangePartitioner {
    fn default() -> Self {
        RangePartitioner {
            parts_per_server: 4,
        }
    }
}

impl Partitioner for RangePartitioner {
    fn name(&self) -> &str {
        "range"
    }

    fn partition(&self, r: &CreateMatrixRequest, servers: usize) -> Result<Vec<BlockRange>> {
        let target = self.parts_per_server.max(1) * servers.max(1) as u64;
        let (row_blocks, col_blocks) = match (r.block_rows, r.block_cols) {
            (0, 0) if r.rows >= target => (target, 1),
            // Rows kept together (a model with several outputs and their optimizer state):
            // columns split as for a short matrix.
            (0, 0) => (1, target.min(r.cols)),
            (br, 0) if br >= r.rows => (1, target.min(r.cols)),
            (br, bc) => (
                r.rows.div_ceil(if br == 0 { r.rows } else { br }),
                r.cols.div_ceil(if bc == 0 { r.cols } else { bc }),
            ),
        };
        if row_blocks.saturating_mul(col_blocks) > MAX_BLOCKS {
            return Err(PsError::InvalidArgument(format!(
                "matrix '{}' would have {row_blocks} x {col_blocks} blocks, over the limit of \
                 {MAX_BLOCKS}; use larger blocks",
                r.name
            )));
        }
        let mut blocks = Vec::with_capacity((row_blocks * col_blocks) as usize);
        for rows in split(r.rows, row_blocks) {
            for cols in split(r.cols, col_blocks) {
                blocks.push(BlockRange {
                    rows: rows.clone(),
                    cols,
                });
            }
        }
        Ok(blocks)
    }
}

/// `n` cut into `k` near-equal, non-empty ranges.
fn split(n: u64, k: u64) -> impl Iterator<Item = Range<u64>> {
    let edge = move |i: u64| (u128::from(n) * u128::from(i) / u128::from(k)) as u64;
    (0..k).map(move |i| edge(i)..edge(i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(rows: u64, cols: u64) -> CreateMatrixRequest {
        CreateMatrixRequest {
            name: "m".into(),
            rows,
            cols,
            ..Default::default()
        }
    }

    #[test]
    fn a_vector_gets_four_column_blocks_per_server() {
        let blocks = RangePartitioner::default()
            .partition(&request(1, 1 << 63), 2)
            .unwrap();
        assert_eq!(blocks.len(), 8);
        assert_eq!(blocks[0].cols.start, 0);
        assert_eq!(blocks[7].cols.end, 1 << 63);
        assert!(blocks.windows(2).all(|w| w[0].cols.end == w[1].cols.start));
    }

    #[test]
    fn tall_matrices_split_rows_and_hints_make_a_grid() {
        let blocks = RangePartitioner::default()
            .partition(&request(100, 10), 1)
            .unwrap();
        assert_eq!(blocks.len(), 4);
        assert!(blocks.iter().all(|b| b.cols == (0..10)));
        let mut r = request(10, 10);
        (r.block_rows, r.block_cols) = (5, 3);
        let blocks = RangePartitioner::default().partition(&r, 3).unwrap();
        assert_eq!(blocks.len(), 2 * 4);
    }

    #[test]
    fn short_matrices_keep_their_rows_together() {
        let blocks = RangePartitioner::default()
            .partition(&request(3, 1 << 40), 2)
            .unwrap();
        assert_eq!(blocks.len(), 8);
        assert!(blocks.iter().all(|b| b.rows == (0..3)));
        let mut tall = request(40, 1000);
        tall.block_rows = 40;
        let blocks = RangePartitioner::default().partition(&tall, 2).unwrap();
        assert_eq!(blocks.len(), 8);
        assert!(blocks.iter().all(|b| b.rows == (0..40)));
    }

    #[test]
    fn tiny_matrices_never_get_empty_blocks() {
        let blocks = RangePartitioner::default()
            .partition(&request(1, 3), 4)
            .unwrap();
        assert_eq!(blocks.len(), 3);
        assert!(blocks.iter().all(|b| !b.cols.is_empty()));
    }
}
