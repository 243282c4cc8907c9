//! SketchML properties over random gradients: keys come back exactly; every value keeps its
//! sign and never exceeds the upper edge of its true bucket; random, truncated and corrupted
//! payloads give errors, never panics.

use std::collections::HashMap;

use angel_proto::sketchml::quantile::Buckets;
use angel_proto::sketchml::{SketchParams, bucket_count, decode, encode, share};
use proptest::prelude::*;

/// A sparse gradient: distinct keys with non-zero values over several magnitudes.
fn gradient() -> impl Strategy<Value = (Vec<u64>, Vec<f64>)> {
    prop::collection::hash_map(
        0u64..1 << 40,
        (prop::bool::ANY, 1e-6f64..1.0, -3i32..3),
        1..3000,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(|(k, (neg, v, e))| (k, if neg { -1.0 } else { 1.0 } * v * 10f64.powi(e)))
            .unzip()
    })
}

fn params() -> impl Strategy<Value = SketchParams> {
    (
        prop::sample::select(vec![4usize, 16, 64, 256]),
        1usize..9,
        1usize..4,
        0.05f64..1.5,
    )
        .prop_map(|(buckets, groups, rows, col_ratio)| SketchParams {
            buckets,
            groups: groups.min(buckets),
            rows,
            col_ratio,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn keys_exact_signs_kept_magnitudes_bounded((keys, values) in gradient(), p in params()) {
        let payload = encode(&keys, &values, &p).unwrap();
        let (back_keys, back_values) = decode(&payload, usize::MAX).unwrap();
        prop_assert_eq!(back_keys.len(), keys.len());
        let decoded: HashMap<u64, f64> = back_keys.iter().copied().zip(back_values).collect();
        prop_assert_eq!(decoded.len(), keys.len());
        // The buckets the encoder used, rebuilt the same way per sign.
        let side = |neg: bool| -> Vec<f64> {
            values.iter().filter(|v| (**v < 0.0) == neg).map(|v| v.abs()).collect()
        };
        let (neg, pos) = (side(true), side(false));
        let (bn, bp) = share(bucket_count(&p, keys.len()), neg.len(), pos.len());
        let (bn, bp) = (Buckets::build(&neg, bn.max(1)), Buckets::build(&pos, bp.max(1)));
        for (k, v) in keys.iter().zip(&values) {
            let got = decoded[k];
            prop_assert!(got.signum() == v.signum(), "key {} {} -> {}", k, v, got);
            let b = if *v < 0.0 { &bn } else { &bp };
            let upper = b.splits.get(b.index(v.abs())).copied().unwrap_or(f64::INFINITY);
            prop_assert!(got.abs() <= upper, "key {} {} -> {} above bucket edge {}", k, v, got, upper);
        }
    }

    #[test]
    fn truncated_and_corrupted_payloads_are_errors(
        (keys, values) in gradient(),
        cut in 0.0f64..1.0,
        flip in any::<(usize, u8)>(),
    ) {
        let payload = encode(&keys, &values, &SketchParams::default()).unwrap();
        let at = (payload.len() as f64 * cut) as usize;
        prop_assert!(decode(&payload[..at], usize::MAX).is_err());
        let mut broken = payload.clone();
        let i = flip.0 % broken.len();
        broken[i] ^= flip.1 | 1;
        // A flipped byte may still decode (a key or a mean changes); it must not panic.
        let _ = decode(&broken, usize::MAX);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes, usize::MAX);
        let mut versioned = bytes;
        versioned.insert(0, angel_proto::sketchml::VERSION);
        let _ = decode(&versioned, usize::MAX);
    }
}

#[test]
fn compact_keys_cost_under_two_bytes_a_pair() {
    // A mini-batch gradient over compact counter indices: 20,000 of 500,000 features.
    let keys: Vec<u64> = (0..20_000u64).map(|i| i * 25 + i % 7).collect();
    let values: Vec<f64> = (0..20_000u64)
        .map(|i| ((i * 7919 % 2001) as f64 - 1000.5) * 1e-5)
        .collect();
    let payload = encode(&keys, &values, &SketchParams::default()).unwrap();
    let per_pair = payload.len() as f64 / keys.len() as f64;
    assert!(per_pair < 2.0, "{per_pair:.2} bytes per pair");
    let (mut back, _) = decode(&payload, usize::MAX).unwrap();
    back.sort_unstable();
    assert_eq!(back, keys);
}
