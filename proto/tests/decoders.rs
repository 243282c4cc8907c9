//! Every decoder a server runs on request bytes, fed seeded random payloads (raw noise and
//! valid payloads with bytes flipped or cut): each answers Ok or an error, never panics, and
//! never decodes past the cap it was given.

use angel_proto::counter_keys::{decode_str_keys, encode_str_keys};
use angel_proto::{Compression, ValueType, codec, wire};
use bytes::Bytes;

/// A small deterministic generator, so a failure replays.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, max: u64) -> Vec<u8> {
        let n = self.next() % max;
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// `valid` with a few bytes flipped, or cut short.
    fn mangle(&mut self, valid: &[u8]) -> Vec<u8> {
        let mut out = valid.to_vec();
        if out.is_empty() {
            return out;
        }
        match self.next() % 3 {
            0 => out.truncate((self.next() % out.len() as u64) as usize),
            _ => {
                for _ in 0..1 + self.next() % 4 {
                    let at = (self.next() % out.len() as u64) as usize;
                    out[at] ^= 1 << (self.next() % 8);
                }
            }
        }
        out
    }
}

const CAP: usize = 2_000;
const ROUNDS: usize = 3_000;

#[test]
fn slice_codecs_never_panic_nor_pass_their_cap() {
    let mut noise = Noise(0x5eed_1234_abcd_0001);
    let sketch: Compression = "sketchml".parse().unwrap();
    let keys: Vec<u64> = (0..1_500u64).map(|i| i * 37 + (i % 5)).collect();
    let values: Vec<f32> = (0..1_500).map(|i| (i % 41) as f32 * 0.01 - 0.2).collect();
    let sketched = codec::encode_slice(&sketch, &keys, &values);
    assert_eq!(sketched.codec, codec::SKETCHML);
    let (rice, rice_keys) = codec::encode_keys(&sketch, &keys);
    assert_eq!(rice, codec::RICE_KEYS);
    for round in 0..ROUNDS {
        let (tag, keys, values) = match round % 4 {
            0 => (
                codec::SKETCHML,
                Bytes::new(),
                noise.mangle(&sketched.values),
            ),
            1 => (
                codec::RICE_KEYS,
                Bytes::from(noise.mangle(&rice_keys)),
                Vec::new(),
            ),
            2 => (codec::SKETCHML, Bytes::new(), noise.bytes(4_096)),
            _ => (
                codec::RICE_KEYS,
                Bytes::from(noise.bytes(4_096)),
                Vec::new(),
            ),
        };
        let cap = (noise.next() % CAP as u64) as usize;
        let decoded = codec::decode_slice(tag, keys.clone(), values.into(), ValueType::F32, cap);
        if let Ok((k, _)) = decoded {
            assert!(
                k.len() <= cap * 8,
                "round {round}: {} key bytes over cap {cap}",
                k.len()
            );
        }
    }
}

#[test]
fn packed_arrays_and_counter_keys_never_panic() {
    let mut noise = Noise(0x0bad_f00d_2026_0001);
    let (data, lengths) = encode_str_keys(&["alpha", "b", "", "gamma-delta"]).unwrap();
    for _ in 0..ROUNDS {
        let bytes = noise.bytes(256);
        let _ = wire::decode_keys(&bytes, "keys");
        let _ = wire::decode_values::<f64>(&bytes, "values");
        let mut dest = vec![0f32; (noise.next() % 64) as usize];
        let _ = wire::decode_values_into(&bytes, &mut dest, "values");
        let (d, l) = (noise.mangle(&data), noise.mangle(&lengths));
        if let Ok(keys) = decode_str_keys(&d, &l) {
            assert!(keys.iter().map(|k| k.len()).sum::<usize>() <= d.len());
        }
        let _ = decode_str_keys(&bytes, &noise.bytes(64));
    }
}
