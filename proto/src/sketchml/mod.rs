//! SketchML: lossy compression of sparse gradients (Jiang et al., SIGMOD 2018; Angel+ 3.2).
//!
//! Encoding a gradient (keys, values):
//! 1. [`quantile`]: positive and negative values apart (a sign never flips), magnitudes cut
//!    into equal-frequency buckets from a quantile sketch; each bucket's mean is sent once.
//! 2. [`minmax`]: buckets split into groups aligned at zero; per group a MinMaxSketch maps each
//!    key to its bucket offset in one byte per cell, fewer cells than keys.
//! 3. [`keys`]: per group, keys sorted and their gaps Rice-coded.
//!
//! The pairs of each sign's top bucket (1/q of them, the largest gradients) are sent as they
//! are, after the groups: a shared mean or a collision would distort them most.
//!
//! [`bits`] reads and writes the payload's byte and bit streams, bounds-checked.
//!
//! Decoding rebuilds the keys, queries each key's bucket and maps it to the bucket's mean.
//! Decoded magnitudes never exceed the upper edge of the true bucket; keys are exact.
//!
//! Payload (version 1): `version u8, pairs varint, negative buckets u16, positive buckets u16,
//! bucket means f32.., groups varint`, then per group `sign u8, first bucket u16, width u16,
//! keys varint, rows u8, cols varint, cells u8.., keys` ([`keys::encode`]); then `exact pairs
//! varint, keys, values f32..`.

pub mod bits;
pub mod keys;
pub mod minmax;
pub mod quantile;

use bits::{Reader, put_varint};
use minmax::{MAX_ROWS, MinMaxSketch};
use quantile::Buckets;

use crate::{PsError, Result};

/// The payload version this build writes and reads.
pub const VERSION: u8 = 1;

/// Most buckets a group may span (offsets are one byte).
const MAX_GROUP_WIDTH: usize = 256;

/// The codec's settings; the defaults are the published implementation's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SketchParams {
    /// Quantile buckets over both signs.
    pub buckets: usize,
    /// Groups of buckets, each with its own MinMaxSketch.
    pub groups: usize,
    /// Hash rows per sketch.
    pub rows: usize,
    /// Sketch columns per key of a group.
    pub col_ratio: f64,
}

impl Default for SketchParams {
    fn default() -> Self {
        SketchParams {
            buckets: 256,
            groups: 8,
            rows: 2,
            col_ratio: 0.3,
        }
    }
}

impl SketchParams {
    /// Checks the settings, naming the one out of range.
    pub fn validate(&self) -> Result<()> {
        let why = if !(2..=4096).contains(&self.buckets) {
            "buckets must be 2 to 4096"
        } else if self.groups == 0 || self.groups > self.buckets {
            "groups must be 1 to the number of buckets"
        } else if self.buckets.div_ceil(self.groups) > MAX_GROUP_WIDTH {
            "a group spans at most 256 buckets (buckets / groups <= 256)"
        } else if !(1..=MAX_ROWS).contains(&self.rows) {
            "rows must be 1 to 8"
        } else if !(self.col_ratio > 0.0 && self.col_ratio <= 4.0) {
            "col_ratio must be above 0 and at most 4"
        } else {
            return Ok(());
        };
        Err(PsError::InvalidArgument(format!(
            "sketchml({}, {}, {}, {}): {why}",
            self.buckets, self.groups, self.rows, self.col_ratio
        )))
    }
}

/// Buckets used for `pairs` pairs: the configured number, but at most one per 4 pairs (and at
/// least 4), so a small push does not pay for 256 means of near-empty buckets.
pub fn bucket_count(params: &SketchParams, pairs: usize) -> usize {
    params.buckets.min((pairs / 4).max(4))
}

/// `total` shared between two sides in proportion to `a` and `b`, at least 1 for a side
/// that has anything (so two sides may get 1 each out of 1).
pub fn share(total: usize, a: usize, b: usize) -> (usize, usize) {
    match (a, b) {
        (0, 0) => (0, 0),
        (0, _) => (0, total),
        (_, 0) => (total, 0),
        _ if total < 2 => (1, 1),
        _ => {
            let x = ((total * a + (a + b) / 2) / (a + b)).clamp(1, total - 1);
            (x, total - x)
        }
    }
}

/// One sign's buckets and how they are grouped.
struct Side {
    negative: bool,
    buckets: Buckets,
    /// The bucket of each of this sign's values, in input order.
    indices: Vec<u16>,
    /// Buckets per group.
    width: usize,
}

impl Side {
    fn new(negative: bool, magnitudes: &[f64], buckets: usize, groups: usize) -> Option<Side> {
        if magnitudes.is_empty() {
            return None;
        }
        let (buckets, indices) = Buckets::build_indexed(magnitudes, buckets.max(1));
        let count = buckets.means.len();
        let groups = groups.max(count.div_ceil(MAX_GROUP_WIDTH)).clamp(1, count);
        Some(Side {
            negative,
            width: count.div_ceil(groups),
            buckets,
            indices,
        })
    }

    fn groups(&self) -> usize {
        self.buckets.means.len().div_ceil(self.width)
    }
}

/// Encodes `keys` (any order, distinct or not) and their finite `values`.
pub fn encode(keys: &[u64], values: &[f64], params: &SketchParams) -> Result<Vec<u8>> {
    params.validate()?;
    if keys.len() != values.len() {
        return Err(PsError::InvalidArgument(format!(
            "sketchml: {} keys but {} values",
            keys.len(),
            values.len()
        )));
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(PsError::InvalidArgument(format!(
            "sketchml: value {} of key {} is not finite",
            values[i], keys[i]
        )));
    }
    let mut order: Vec<usize> = (0..keys.len()).collect();
    if !keys.is_sorted() {
        order.sort_unstable_by_key(|&i| keys[i]);
    }
    // Magnitudes per sign (0 = negative), and where each value sits in its sign's list.
    let mut magnitudes: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut at = Vec::with_capacity(values.len());
    for v in values {
        let side = &mut magnitudes[usize::from(*v >= 0.0)];
        at.push(side.len());
        side.push(v.abs());
    }
    let [neg, pos] = magnitudes;
    let buckets = bucket_count(params, keys.len());
    let (bn, bp) = share(buckets, neg.len(), pos.len());
    let (gn, gp) = share(params.groups.min(buckets), neg.len(), pos.len());
    let sides = [
        Side::new(true, &neg, bn, gn),
        Side::new(false, &pos, bp, gp),
    ];

    let mut out = vec![VERSION];
    put_varint(&mut out, keys.len() as u64);
    for side in &sides {
        let count = side.as_ref().map_or(0, |s| s.buckets.means.len());
        out.extend_from_slice(&(count as u16).to_le_bytes());
    }
    for side in sides.iter().flatten() {
        for m in &side.buckets.means {
            out.extend_from_slice(&m.to_le_bytes());
        }
    }
    // Each group's (key, offset) pairs in key order.
    let first_group = [0, sides[0].as_ref().map_or(0, Side::groups)];
    let total_groups = first_group[1] + sides[1].as_ref().map_or(0, Side::groups);
    let mut grouped: Vec<Vec<(u64, u8)>> = vec![Vec::new(); total_groups];
    let mut exact = Vec::new();
    for &i in &order {
        let s = usize::from(values[i] >= 0.0);
        let side = sides[s]
            .as_ref()
            .expect("a side holds every value of its sign");
        let bucket = usize::from(side.indices[at[i]]);
        if bucket + 1 == side.buckets.means.len() {
            exact.push(i);
            continue;
        }
        let group = first_group[s] + bucket / side.width;
        grouped[group].push((keys[i], (bucket % side.width) as u8));
    }
    put_varint(&mut out, total_groups as u64);
    for (s, side) in sides.iter().enumerate() {
        let Some(side) = side else { continue };
        for g in 0..side.groups() {
            let items = &grouped[first_group[s] + g];
            let first = g * side.width;
            let width = side.width.min(side.buckets.means.len() - first);
            write_group(&mut out, side.negative, first, width, items, params);
        }
    }
    write_exact(&mut out, &exact, keys, values);
    Ok(out)
}

/// Appends the pairs of each sign's top bucket as they are: count, keys, f32 values. The
/// largest gradients (the intercept, frequent features) are the ones a shared bucket mean or
/// a sketch collision would distort most, and they are only 1/q of the pairs.
fn write_exact(out: &mut Vec<u8>, exact: &[usize], keys: &[u64], values: &[f64]) {
    put_varint(out, exact.len() as u64);
    let sorted: Vec<u64> = exact.iter().map(|&i| keys[i]).collect();
    keys::encode(&sorted, out);
    for &i in exact {
        out.extend_from_slice(&(values[i] as f32).to_le_bytes());
    }
}

/// Appends one group: header, sketch cells, keys.
fn write_group(
    out: &mut Vec<u8>,
    negative: bool,
    first: usize,
    width: usize,
    items: &[(u64, u8)],
    params: &SketchParams,
) {
    out.push(u8::from(!negative));
    out.extend_from_slice(&(first as u16).to_le_bytes());
    out.extend_from_slice(&(width as u16).to_le_bytes());
    put_varint(out, items.len() as u64);
    let cols = ((items.len() as f64 * params.col_ratio).ceil() as usize).max(1);
    let mut sketch = MinMaxSketch::new(params.rows, cols);
    for &(key, offset) in items {
        sketch.insert(key, offset);
    }
    out.push(params.rows as u8);
    put_varint(out, cols as u64);
    out.extend_from_slice(sketch.cells());
    let keys: Vec<u64> = items.iter().map(|&(k, _)| k).collect();
    keys::encode(&keys, out);
}

/// Refuses a payload declaring `n` pairs when at most `max_pairs` may be decoded.
pub fn check_pairs(n: usize, max_pairs: usize) -> Result<()> {
    match n <= max_pairs {
        true => Ok(()),
        false => Err(PsError::TooLarge(format!(
            "a compressed slice declares {n} pairs, more than the {max_pairs} this request may \
             still decode to (the request size limit applies to decoded data)"
        ))),
    }
}

/// Decodes a payload written by [`encode`] into (keys, values), grouped by bucket group. A
/// payload declaring more than `max_pairs` pairs is refused before anything is allocated: a
/// few bytes can declare millions of pairs, so the receiver's limit applies to the decoded size.
pub fn decode(bytes: &[u8], max_pairs: usize) -> Result<(Vec<u64>, Vec<f64>)> {
    let mut r = Reader::new(bytes);
    let version = r.u8("version")?;
    if version != VERSION {
        return Err(PsError::InvalidArgument(format!(
            "sketchml payload version {version}; this build decodes version {VERSION}"
        )));
    }
    let n = r.count(1, "pair count")?;
    check_pairs(n, max_pairs)?;
    let counts = [
        usize::from(r.u16("negative buckets")?),
        usize::from(r.u16("positive buckets")?),
    ];
    let mut means = [Vec::new(), Vec::new()];
    for (side, &count) in means.iter_mut().zip(&counts) {
        for _ in 0..count {
            let m = r.f32("bucket mean")?;
            if !(m.is_finite() && m >= 0.0) {
                return Err(r.corrupt("bucket mean"));
            }
            side.push(f64::from(m));
        }
    }
    let groups = r.count(8, "group count")?;
    let (mut keys, mut values) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..groups {
        read_group(&mut r, &means, n - keys.len(), &mut keys, &mut values)?;
    }
    let exact = r.count(32, "exact pairs")?;
    if exact > n - keys.len() {
        return Err(r.corrupt("exact pairs"));
    }
    keys.extend(keys::decode(&mut r, exact)?);
    for _ in 0..exact {
        let v = r.f32("exact value")?;
        if !v.is_finite() {
            return Err(r.corrupt("exact value"));
        }
        values.push(f64::from(v));
    }
    if keys.len() != n || r.remaining() != 0 {
        return Err(r.corrupt("pair count or trailing bytes"));
    }
    Ok((keys, values))
}

/// Reads one group, appending at most `room` pairs.
fn read_group(
    r: &mut Reader,
    means: &[Vec<f64>; 2],
    room: usize,
    keys: &mut Vec<u64>,
    values: &mut Vec<f64>,
) -> Result<()> {
    let positive = match r.u8("group sign")? {
        0 => false,
        1 => true,
        _ => return Err(r.corrupt("group sign")),
    };
    let side = &means[usize::from(positive)];
    let first = usize::from(r.u16("group first bucket")?);
    let width = usize::from(r.u16("group width")?);
    if width == 0 || width > MAX_GROUP_WIDTH || first + width > side.len() {
        return Err(r.corrupt("group buckets"));
    }
    let n = r.count(1, "group keys")?;
    let rows = usize::from(r.u8("sketch rows")?);
    let cols = r.count(8, "sketch columns")?;
    if n > room || !(1..=MAX_ROWS).contains(&rows) || cols == 0 {
        return Err(r.corrupt("group shape"));
    }
    let cells = r.take(rows * cols, "sketch cells")?.to_vec();
    let sketch = MinMaxSketch::from_cells(rows, cols, cells);
    let sign = if positive { 1.0 } else { -1.0 };
    for key in keys::decode(r, n)? {
        let offset = usize::from(sketch.query(key));
        if offset >= width {
            return Err(r.corrupt("sketch cell outside its group"));
        }
        keys.push(key);
        values.push(sign * side[first + offset]);
    }
    Ok(())
}
