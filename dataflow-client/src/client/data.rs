//! The data verbs: pull and push keys or whole rows of a matrix (a training worker's at its
//! clock, gradients through the matrix's optimizer), and PS functions.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use angel_proto::{
    Ack, Element, Merge, PsError, PsfBlock, PsfOperand, PsfRequest, Result, RowSlice, StorageKind,
    codec, wire,
};
use bytes::Bytes;
use parking_lot::Mutex;

use angel_proto::merge::{finish, merge_into};
use angel_proto::nonzeros;

use super::PsClient;
use super::scatter::SliceOp;
use crate::matrix::Matrix;
use crate::routes::server_of;
use crate::split::KeySplit;
use crate::worker_calls::{PushOptions, WorkerClock};

/// Largest row a client materialises densely (2^28 elements, 1 GiB of f32).
const MAX_DENSE_ROW: u64 = 1 << 28;

impl PsClient {
    /// Pulls the values of `keys` in `row`, in request order. Duplicate keys are fetched once;
    /// only the partitions holding the keys are asked.
    pub async fn pull_keys<T: Element>(
        &self,
        name: &str,
        row: u64,
        keys: &[u64],
    ) -> Result<Vec<T>> {
        Ok(self.pull_at(name, &[row], keys, None).await?.0)
    }

    /// [`PsClient::pull_keys`] of the same `keys` in each of `rows`, in one request (a model
    /// with several outputs), by a training worker at its clock (`clock`, which the servers
    /// record). Returns the values row after row, and the version of each partition read,
    /// for a DynSGD push.
    pub async fn pull_at<T: Element>(
        &self,
        name: &str,
        rows: &[u64],
        keys: &[u64],
        clock: Option<WorkerClock>,
    ) -> Result<(Vec<T>, Vec<Ack>)> {
        let m = self.typed_matrix::<T>(name).await?;
        let compression = m.pull_compression();
        let mut splits = Vec::with_capacity(rows.len());
        let mut slices = Vec::new();
        for &row in rows {
            let band = m.layout.band(row)?;
            let split = KeySplit::new(&m.layout, band, keys)?;
            slices.extend(split.groups.iter().map(|g| {
                let (codec, keys) = codec::encode_keys(&compression, &g.keys);
                RowSlice {
                    partition_id: m.meta.partitions[band.part(g.pos)].id,
                    row,
                    keys,
                    values: Bytes::new(),
                    codec,
                }
            }));
            splits.push(split);
        }
        let versions = Mutex::new(Vec::new());
        let replies = self
            .send_slices(&m, slices, SliceOp::Pull(clock, Some(&versions)))
            .await?;
        let mut replies = replies.iter();
        let mut values = Vec::with_capacity(rows.len() * keys.len());
        for split in &splits {
            let answers = (split.groups.iter())
                .zip(replies.by_ref())
                .map(|(g, reply)| decode_exact::<T>(&reply.values, g.keys.len(), &m))
                .collect::<Result<Vec<_>>>()?;
            values.extend(split.reassemble(&answers));
        }
        Ok((values, versions.into_inner()))
    }

    /// Pulls whole rows as dense vectors of `cols` values (absent sparse keys read as zero).
    pub async fn pull_rows<T: Element>(&self, name: &str, rows: &[u64]) -> Result<Vec<Vec<T>>> {
        let m = self.typed_matrix::<T>(name).await?;
        let cols = m.meta.cols;
        if cols > MAX_DENSE_ROW {
            return Err(PsError::TooLarge(format!(
                "rows of matrix '{name}' have {cols} columns, too many to pull densely; pull keys instead"
            )));
        }
        let mut slices = Vec::new();
        let mut places = Vec::new();
        for (i, &row) in rows.iter().enumerate() {
            let band = m.layout.band(row)?;
            for pos in 0..band.len() {
                let part = &m.meta.partitions[band.part(pos)];
                slices.push(RowSlice {
                    partition_id: part.id,
                    row,
                    ..Default::default()
                });
                places.push((i, band.cols(pos)));
            }
        }
        let replies = self
            .send_slices(&m, slices, SliceOp::Pull(None, None))
            .await?;
        let mut out = vec![vec![T::default(); cols as usize]; rows.len()];
        for (reply, (i, range)) in replies.iter().zip(places) {
            let width = (range.end - range.start) as usize;
            let dest = &mut out[i][range.start as usize..range.end as usize];
            if reply.keys.is_empty() && m.meta.storage() == StorageKind::Dense {
                wire::decode_values_into(&reply.values, dest, "pull reply values")?;
                continue;
            }
            let keys = wire::decode_keys(&reply.keys, "pull reply keys")?;
            let values = decode_exact::<T>(&reply.values, keys.len(), &m)?;
            for (k, v) in keys.into_iter().zip(values) {
                let col = k.checked_sub(range.start).filter(|&c| c < width as u64);
                let col = col.ok_or_else(|| {
                    PsError::Internal(format!("server returned key {k} outside block {range:?}"))
                })?;
                dest[col as usize] = v;
            }
        }
        Ok(out)
    }

    /// Adds `values` to `keys` of `row`. Duplicate keys are summed before sending.
    pub async fn push_keys<T: Element>(
        &self,
        name: &str,
        row: u64,
        keys: &[u64],
        values: &[T],
    ) -> Result<()> {
        self.push_with(name, &[row], keys, values, PushOptions::default())
            .await
    }

    /// Sends gradients of row 0 of a model matrix; the servers apply the optimizer of its
    /// training description per key (state in rows 1..). Duplicate keys are summed before
    /// sending.
    pub async fn push_gradients<T: Element>(
        &self,
        name: &str,
        keys: &[u64],
        grads: &[T],
    ) -> Result<()> {
        let how = PushOptions {
            gradients: true,
            ..Default::default()
        };
        self.push_with(name, &[0], keys, grads, how).await
    }

    /// Pushes `values` to the same `keys` of each of `rows` (values row after row) as one
    /// training step: added, or (`how.gradients`) applied by the optimizer to the weights rows
    /// named; named by a SQL task's change, so a rerun of the task repeats it without effect;
    /// stating the partition versions it was computed from (DynSGD). Duplicate keys are
    /// summed before sending.
    pub async fn push_with<T: Element>(
        &self,
        name: &str,
        rows: &[u64],
        keys: &[u64],
        values: &[T],
        how: PushOptions<'_>,
    ) -> Result<()> {
        if keys.len() * rows.len() != values.len() {
            let each = match rows.len() {
                1 => String::new(),
                n => format!(" in each of {n} rows"),
            };
            return Err(PsError::InvalidArgument(format!(
                "push to matrix '{name}': {} keys{each} but {} values",
                keys.len(),
                values.len()
            )));
        }
        let m = self.typed_matrix::<T>(name).await?;
        let start = Instant::now();
        let compression = m.push_compression();
        let mut slices: Vec<RowSlice> = Vec::new();
        for (&row, values) in rows.iter().zip(values.chunks(keys.len().max(1))) {
            let band = m.layout.band(row)?;
            let split = KeySplit::new(&m.layout, band, keys)?;
            slices.extend(
                split
                    .groups
                    .iter()
                    .zip(split.merge(values))
                    .map(|(g, merged)| {
                        let encoded = codec::encode_slice(&compression, &g.keys, &merged);
                        RowSlice {
                            partition_id: m.meta.partitions[band.part(g.pos)].id,
                            row,
                            keys: encoded.keys,
                            values: encoded.values,
                            codec: encoded.codec,
                        }
                    }),
            );
        }
        // Timed as it went: a slice falls back to raw when small or not smaller compressed.
        let sketched = slices.iter().any(|s| s.codec == codec::SKETCHML);
        self.send_slices(&m, slices, SliceOp::Push(how)).await?;
        if let Some(choice) = &m.choice {
            let raw_bytes = values.len() * (8 + std::mem::size_of::<T>());
            choice.record(sketched, raw_bytes, start.elapsed());
        }
        Ok(())
    }

    /// Adds a whole dense row (`values.len()` must equal the matrix's columns).
    pub async fn push_row<T: Element>(&self, name: &str, row: u64, values: &[T]) -> Result<()> {
        let m = self.typed_matrix::<T>(name).await?;
        if values.len() as u64 != m.meta.cols {
            return Err(PsError::InvalidArgument(format!(
                "push to row {row} of matrix '{name}': {} values for {} columns",
                values.len(),
                m.meta.cols
            )));
        }
        let band = m.layout.band(row)?;
        let slices = (0..band.len())
            .map(|pos| {
                let cols = band.cols(pos);
                RowSlice {
                    partition_id: m.meta.partitions[band.part(pos)].id,
                    row,
                    keys: Bytes::new(),
                    values: wire::encode_values(&values[cols.start as usize..cols.end as usize]),
                    codec: codec::RAW,
                }
            })
            .collect();
        self.send_slices(&m, slices, SliceOp::Push(PushOptions::default()))
            .await
            .map(drop)
    }

    /// Runs the PS function `name` on the servers over `operands` (matrix name, row) with
    /// scalar `args`, and combines the per-partition results with the merge the function
    /// declares. Operands must share one partition layout.
    pub async fn psf(
        &self,
        name: &str,
        operands: &[(&str, u64)],
        args: &[f64],
    ) -> Result<Vec<f64>> {
        let Some(&(first, first_row)) = operands.first() else {
            return Err(PsError::InvalidArgument(format!(
                "PS function '{name}' needs an operand"
            )));
        };
        let lead = self.matrix(first).await?;
        let mut matrices = Vec::with_capacity(operands.len());
        for &(matrix, row) in operands {
            let m = self.matrix(matrix).await?;
            m.layout.band(row)?;
            matrices.push((m, row));
        }
        let lead_band = lead.layout.band(first_row)?;
        let mut blocks = Vec::with_capacity(lead_band.len());
        for pos in 0..lead_band.len() {
            let lead_part = &lead.meta.partitions[lead_band.part(pos)];
            let mut ids = Vec::with_capacity(matrices.len());
            for (m, row) in &matrices {
                let band = m.layout.band(*row)?;
                let colocated = band.len() == lead_band.len()
                    && band.cols(pos) == lead_band.cols(pos)
                    && m.meta.partitions[band.part(pos)].server_id == lead_part.server_id;
                if !colocated {
                    return Err(PsError::InvalidArgument(format!(
                        "PS function '{name}': operands '{first}' and '{}' are partitioned differently",
                        m.meta.name
                    )));
                }
                ids.push(m.meta.partitions[band.part(pos)].id);
            }
            blocks.push(PsfBlock { partition_ids: ids });
        }
        let operand_msgs: Vec<PsfOperand> = matrices
            .iter()
            .map(|(m, row)| PsfOperand {
                matrix_id: m.meta.id,
                row: *row,
            })
            .collect();
        let merge_kind = Arc::new(Mutex::new(Merge::Sum));
        let lead_id = lead.meta.id;
        let results = self
            .scatter(
                blocks,
                None,
                |routing, block: &PsfBlock| server_of(routing, lead_id, block.partition_ids[0]),
                |mut conn, blocks, caller| {
                    let request = PsfRequest {
                        caller: Some(caller),
                        name: name.to_string(),
                        operands: operand_msgs.clone(),
                        args: args.to_vec(),
                        blocks,
                    };
                    let merge_kind = merge_kind.clone();
                    async move {
                        let reply = conn.rpc.call_psf(request).await?.into_inner();
                        *merge_kind.lock() = reply.merge();
                        Ok(reply.results.into_iter().map(|r| r.values).collect())
                    }
                },
            )
            .await?;
        let merge = *merge_kind.lock();
        let mut acc = Vec::new();
        for partial in &results {
            merge_into(merge, &mut acc, partial);
        }
        Ok(finish(merge, acc))
    }

    /// The elements of row `row` of matrix `name` that are not zero within columns `cols`,
    /// as (column, value) pairs, through the PS function `nonzeros`: at most `most` per
    /// block (its lowest columns; 0: all), each block's ascending, the blocks' one after the
    /// other. A reader pages through a block by asking again from past its last column.
    pub async fn nonzeros(
        &self,
        (name, row): (&str, u64),
        cols: Range<u64>,
        most: u64,
    ) -> Result<Vec<(u64, f64)>> {
        let answer = (self.psf("nonzeros", &[(name, row)], &nonzeros::args(cols, most))).await?;
        nonzeros::pairs(&answer)
    }

    async fn typed_matrix<T: Element>(&self, name: &str) -> Result<Arc<Matrix>> {
        let m = self.matrix(name).await?;
        if m.value_type() != T::VALUE_TYPE {
            return Err(PsError::InvalidArgument(format!(
                "matrix '{name}' holds {:?} values, not {:?}",
                m.value_type(),
                T::VALUE_TYPE
            )));
        }
        Ok(m)
    }
}

fn decode_exact<T: Element>(bytes: &[u8], expected: usize, m: &Matrix) -> Result<Vec<T>> {
    let values: Vec<T> = wire::decode_values(bytes, "pull reply values")?;
    if values.len() != expected {
        return Err(PsError::Internal(format!(
            "pull from matrix '{}' returned {} values for {expected} asked",
            m.meta.name,
            values.len()
        )));
    }
    Ok(values)
}
