//! Gradient keys as sorted deltas in Rice codes: the first key as a varint, then each gap to
//! the next key as `gap >> k` in unary and the low `k` bits as they are, with `k` chosen from
//! the mean gap. This is the adaptive form of SketchML's delta-binary keys: a gap costs about
//! `log2(mean gap) + 1.5` bits instead of a whole number of bytes plus a flag.

use super::bits::{BitReader, BitWriter, Reader, put_varint};
use crate::Result;

/// Gaps of `ESCAPE << k` and more are written as 64 raw bits after `ESCAPE` ones.
const ESCAPE: u32 = 32;

/// The Rice parameter for the gaps of `sorted`: floor(log2(mean gap x ln 2)), the optimum
/// for geometric gaps, at most 56.
fn parameter(sorted: &[u64]) -> u32 {
    let (Some(first), Some(last)) = (sorted.first(), sorted.last()) else {
        return 0;
    };
    let mean = (last - first) / (sorted.len() as u64).max(2).saturating_sub(1).max(1);
    let scaled = match mean.checked_mul(11) {
        Some(m) => m / 16,
        None => mean / 16 * 11,
    };
    (63 - scaled.max(1).leading_zeros()).min(56)
}

/// Appends `sorted` (ascending, duplicates allowed): k, first key, bit-stream length, bits.
pub fn encode(sorted: &[u64], out: &mut Vec<u8>) {
    let k = parameter(sorted);
    out.push(k as u8);
    put_varint(out, sorted.first().copied().unwrap_or(0));
    let mut bits = BitWriter::default();
    for pair in sorted.windows(2) {
        let gap = pair[1] - pair[0];
        let high = gap >> k;
        if high >= u64::from(ESCAPE) {
            bits.put(u64::MAX, ESCAPE);
            bits.put_u64(gap);
        } else {
            bits.put((1u64 << high) - 1, high as u32 + 1);
            bits.put(gap, k);
        }
    }
    let bits = bits.finish();
    put_varint(out, bits.len() as u64);
    out.extend_from_slice(&bits);
}

/// Reads `n` keys written by [`encode`].
pub fn decode(r: &mut Reader, n: usize) -> Result<Vec<u64>> {
    let k = u32::from(r.u8("key Rice parameter")?);
    if k > 56 {
        return Err(r.corrupt("key Rice parameter over 56"));
    }
    let first = r.varint("first key")?;
    let len = r.count(8, "key bit-stream length")?;
    let mut bits = BitReader::new(r.take(len, "key bits")?);
    let mut keys = Vec::with_capacity(n);
    if n == 0 {
        return Ok(keys);
    }
    keys.push(first);
    let mut key = first;
    for _ in 1..n {
        let high = bits.unary(ESCAPE).ok_or_else(|| r.corrupt("key gap"))?;
        let gap = match high {
            ESCAPE => bits.get_u64(),
            _ => bits.get(k).map(|low| u64::from(high) << k | low),
        }
        .ok_or_else(|| r.corrupt("key gap"))?;
        key = key
            .checked_add(gap)
            .ok_or_else(|| r.corrupt("key past 2^64"))?;
        keys.push(key);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_dense_runs_cost_little() {
        for keys in [
            vec![],
            vec![7],
            vec![0, 0, 1, 5, 5, 1 << 40, u64::MAX],
            (0..10_000u64).map(|i| i * 3 + i % 2).collect(),
        ] {
            let mut out = Vec::new();
            encode(&keys, &mut out);
            let back = decode(&mut Reader::new(&out), keys.len()).unwrap();
            assert_eq!(back, keys);
        }
        let dense: Vec<u64> = (0..10_000).map(|i| 1_000 + i * 4).collect();
        let mut out = Vec::new();
        encode(&dense, &mut out);
        assert!(out.len() < 10_000 * 4 / 8 + 16, "{} bytes", out.len());
    }
}
