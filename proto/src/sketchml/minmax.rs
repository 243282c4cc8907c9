//! SketchML's MinMaxSketch: bucket offsets of one group's keys in `rows x cols` cells of one
//! byte. An offset counts buckets away from zero (0 = the group's bucket nearest zero).
//! Inserting keeps, in each cell, the offset closest to zero; querying takes, over the rows,
//! the offset farthest from zero. Every cell a key hashes to holds that key's own offset or a
//! smaller one, so a decoded magnitude never exceeds the true bucket: collisions only shrink a
//! gradient toward zero.

/// See the module documentation.
pub struct MinMaxSketch {
    rows: usize,
    cols: usize,
    cells: Vec<u8>,
}

/// Independent hash seeds, one per row.
const SEEDS: [u64; 8] = [
    0x9e37_79b9_7f4a_7c15,
    0xbf58_476d_1ce4_e5b9,
    0x94d0_49bb_1331_11eb,
    0xd6e8_feb8_6659_fd93,
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
];

/// Most hash rows a sketch may have.
pub const MAX_ROWS: usize = SEEDS.len();

/// The cell of `key` in row `row` of a table `cols` wide (splitmix64 finaliser).
fn cell(key: u64, row: usize, cols: usize) -> usize {
    let mut z = key ^ SEEDS[row];
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (((z >> 32) * cols as u64) >> 32) as usize
}

impl MinMaxSketch {
    /// An empty table (every cell at the farthest offset, so the first insert sets it).
    pub fn new(rows: usize, cols: usize) -> Self {
        MinMaxSketch {
            rows,
            cols,
            cells: vec![u8::MAX; rows * cols],
        }
    }

    /// A table read back from its cells (`cells.len() == rows * cols`).
    pub fn from_cells(rows: usize, cols: usize, cells: Vec<u8>) -> Self {
        debug_assert_eq!(cells.len(), rows * cols);
        MinMaxSketch { rows, cols, cells }
    }

    /// Records `offset` for `key`.
    pub fn insert(&mut self, key: u64, offset: u8) {
        for row in 0..self.rows {
            let c = &mut self.cells[row * self.cols + cell(key, row, self.cols)];
            *c = (*c).min(offset);
        }
    }

    /// The offset recorded for `key`: at most the one inserted.
    pub fn query(&self, key: u64) -> u8 {
        (0..self.rows)
            .map(|row| self.cells[row * self.cols + cell(key, row, self.cols)])
            .max()
            .unwrap_or(0)
    }

    /// The cells, row after row.
    pub fn cells(&self) -> &[u8] {
        &self.cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_never_exceed_inserts_and_are_exact_without_collisions() {
        let mut sketch = MinMaxSketch::new(2, 30);
        let items: Vec<(u64, u8)> = (0..100u64).map(|k| (k * 7919, (k % 13) as u8)).collect();
        for &(k, o) in &items {
            sketch.insert(k, o);
        }
        for &(k, o) in &items {
            assert!(sketch.query(k) <= o);
        }
        let mut wide = MinMaxSketch::new(2, 1 << 16);
        wide.insert(42, 9);
        assert_eq!(wide.query(42), 9);
    }
}
