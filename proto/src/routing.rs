//! Which partition of a matrix holds a given (row, column).
//!
//! Partitions tile the matrix in row bands; inside a band, blocks split the columns. A lookup
//! is a binary search over bands, then over the band's column starts.

use std::ops::Range;

use crate::MatrixMeta;

use crate::{PsError, Result};

/// The tiling of one matrix, validated on construction.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    name: String,
    rows: u64,
    cols: u64,
    bands: Vec<Band>,
}

/// A range of rows and the blocks that split its columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    /// Rows of every block in this band.
    pub rows: Range<u64>,
    /// Column start of each block, ascending; block `i` ends where block `i + 1` starts.
    col_starts: Vec<u64>,
    col_end: u64,
    /// Index into `MatrixMeta::partitions` of each block.
    parts: Vec<usize>,
}

impl Band {
    /// Number of blocks in the band.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// True when the band has no blocks (never, once validated).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Position in the band of the block holding column `col` (`col` must be in range).
    pub fn locate(&self, col: u64) -> usize {
        self.col_starts.partition_point(|&start| start <= col) - 1
    }

    /// Index into `MatrixMeta::partitions` of the block at `pos`.
    pub fn part(&self, pos: usize) -> usize {
        self.parts[pos]
    }

    /// Column range of the block at `pos`.
    pub fn cols(&self, pos: usize) -> Range<u64> {
        let end = self
            .col_starts
            .get(pos + 1)
            .copied()
            .unwrap_or(self.col_end);
        self.col_starts[pos]..end
    }
}

impl Layout {
    /// Derives the layout from a matrix's partitions, checking that they tile it exactly.
    pub fn new(meta: &MatrixMeta) -> Result<Self> {
        let bad = |why: String| {
            PsError::InvalidArgument(format!(
                "partitions of matrix '{}' do not tile it: {why}",
                meta.name
            ))
        };
        let mut order: Vec<usize> = (0..meta.partitions.len()).collect();
        order.sort_by_key(|&i| (meta.partitions[i].row_start, meta.partitions[i].col_start));
        let mut bands: Vec<Band> = Vec::new();
        for i in order {
            let p = &meta.partitions[i];
            if p.row_start >= p.row_end || p.col_start >= p.col_end {
                return Err(bad(format!("partition {} is empty", p.id)));
            }
            match bands.last_mut() {
                Some(band) if band.rows == (p.row_start..p.row_end) => {
                    if p.col_start != band.col_end {
                        return Err(bad(format!(
                            "partition {} starts at column {}, expected {}",
                            p.id, p.col_start, band.col_end
                        )));
                    }
                    band.col_starts.push(p.col_start);
                    band.col_end = p.col_end;
                    band.parts.push(i);
                }
                last => {
                    let expected_row = last.map_or(0, |b| b.rows.end);
                    if let Some(b) = bands.last()
                        && b.col_end != meta.cols
                    {
                        return Err(bad(format!(
                            "rows {:?} end at column {}",
                            b.rows, b.col_end
                        )));
                    }
                    if p.row_start != expected_row || p.col_start != 0 {
                        return Err(bad(format!(
                            "partition {} starts at ({}, {}), expected ({expected_row}, 0)",
                            p.id, p.row_start, p.col_start
                        )));
                    }
                    bands.push(Band {
                        rows: p.row_start..p.row_end,
                        col_starts: vec![p.col_start],
                        col_end: p.col_end,
                        parts: vec![i],
                    });
                }
            }
        }
        match bands.last() {
            Some(b) if b.rows.end == meta.rows && b.col_end == meta.cols => {}
            _ => {
                return Err(bad(format!(
                    "they do not reach ({}, {})",
                    meta.rows, meta.cols
                )));
            }
        }
        Ok(Layout {
            name: meta.name.clone(),
            rows: meta.rows,
            cols: meta.cols,
            bands,
        })
    }

    /// The band holding `row`, or OUT_OF_RANGE naming the matrix.
    pub fn band(&self, row: u64) -> Result<&Band> {
        if row >= self.rows {
            return Err(PsError::OutOfRange(format!(
                "row {row} is out of range for matrix '{}' with {} rows",
                self.name, self.rows
            )));
        }
        let i = self.bands.partition_point(|b| b.rows.end <= row);
        Ok(&self.bands[i])
    }

    /// Checks a column key, or OUT_OF_RANGE naming the key and the matrix.
    pub fn check_col(&self, col: u64) -> Result<()> {
        if col >= self.cols {
            return Err(PsError::OutOfRange(format!(
                "key {col} is out of range for matrix '{}' with {} columns",
                self.name, self.cols
            )));
        }
        Ok(())
    }

    /// Number of columns.
    pub fn cols(&self) -> u64 {
        self.cols
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Partition;

    fn meta(rows: u64, cols: u64, blocks: &[(u64, u64, u64, u64)]) -> MatrixMeta {
        MatrixMeta {
            name: "m".into(),
            rows,
            cols,
            partitions: blocks
                .iter()
                .enumerate()
                .map(|(i, &(r0, r1, c0, c1))| Partition {
                    id: i as u32,
                    row_start: r0,
                    row_end: r1,
                    col_start: c0,
                    col_end: c1,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn locates_blocks_in_a_grid() {
        let m = meta(4, 10, &[(2, 4, 0, 10), (0, 2, 5, 10), (0, 2, 0, 5)]);
        let layout = Layout::new(&m).unwrap();
        let band = layout.band(1).unwrap();
        assert_eq!(band.len(), 2);
        assert_eq!(band.part(band.locate(7)), 1);
        assert_eq!(band.cols(band.locate(4)), 0..5);
        assert_eq!(layout.band(3).unwrap().part(0), 0);
    }

    #[test]
    fn rejects_gaps_overlaps_and_short_tilings() {
        for blocks in [
            vec![(0, 1, 0, 4), (0, 1, 5, 10)],
            vec![(0, 1, 0, 6), (0, 1, 5, 10)],
            vec![(0, 1, 0, 10)],
            vec![(0, 2, 0, 9)],
        ] {
            let err = Layout::new(&meta(2, 10, &blocks)).unwrap_err();
            assert!(err.to_string().contains("matrix 'm'"), "{err}");
        }
    }

    #[test]
    fn out_of_range_names_row_key_and_matrix() {
        let layout = Layout::new(&meta(1, 10, &[(0, 1, 0, 10)])).unwrap();
        let err = layout.band(1).unwrap_err();
        assert!(
            matches!(err, PsError::OutOfRange(ref m) if m.contains("row 1") && m.contains("'m'"))
        );
        let err = layout.check_col(10).unwrap_err();
        assert!(matches!(err, PsError::OutOfRange(ref m) if m.contains("key 10")));
    }
}
