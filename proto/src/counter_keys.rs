//! Counter keys on the wire: the stable hash string keys route and sort by, and how a batch of
//! string keys is packed (bytes back to back plus u32 lengths). Clients encode, servers decode.

use bytes::Bytes;
use xxhash_rust::xxh3::xxh3_64;

use crate::{PsError, Result};

/// Index reported for keys that have none (unknown, or counted under `min_count`).
pub const NO_INDEX: u64 = u64::MAX;

/// The stable hash a key routes and sorts by (below 2^63, like every column key).
pub fn key_hash(key: &str) -> u64 {
    xxh3_64(key.as_bytes()) >> 1
}

/// Packs string keys: bytes back to back, plus packed u32 lengths.
pub fn encode_str_keys<S: AsRef<str>>(keys: &[S]) -> Result<(Bytes, Bytes)> {
    let mut data = Vec::with_capacity(keys.iter().map(|k| k.as_ref().len()).sum());
    let mut lengths = Vec::with_capacity(keys.len());
    for key in keys {
        let key = key.as_ref();
        let len = u32::try_from(key.len()).map_err(|_| {
            PsError::InvalidArgument(format!("a counter key of {} bytes is too long", key.len()))
        })?;
        data.extend_from_slice(key.as_bytes());
        lengths.push(len);
    }
    Ok((
        Bytes::from(data),
        Bytes::copy_from_slice(bytemuck::cast_slice(&lengths)),
    ))
}

/// Unpacks string keys packed by [`encode_str_keys`], checking lengths and UTF-8.
pub fn decode_str_keys<'a>(data: &'a [u8], lengths: &[u8]) -> Result<Vec<&'a str>> {
    if !lengths.len().is_multiple_of(4) {
        return Err(PsError::InvalidArgument(format!(
            "counter key lengths: {} bytes is not a whole number of u32",
            lengths.len()
        )));
    }
    let lengths: Vec<u32> = bytemuck::pod_collect_to_vec(lengths);
    let mut keys = Vec::with_capacity(lengths.len());
    let mut at = 0usize;
    for (i, len) in lengths.into_iter().enumerate() {
        let end = at
            .checked_add(len as usize)
            .filter(|&e| e <= data.len())
            .ok_or_else(|| {
                PsError::InvalidArgument(format!(
                    "counter key {i} runs past the {} bytes of key data",
                    data.len()
                ))
            })?;
        let key = std::str::from_utf8(&data[at..end])
            .map_err(|e| PsError::InvalidArgument(format!("counter key {i} is not UTF-8: {e}")))?;
        keys.push(key);
        at = end;
    }
    if at != data.len() {
        return Err(PsError::InvalidArgument(format!(
            "counter keys use {at} of {} bytes of key data",
            data.len()
        )));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn string_keys_round_trip(keys in proptest::collection::vec(".{0,12}", 0..40)) {
            let (data, lengths) = encode_str_keys(&keys).unwrap();
            prop_assert_eq!(decode_str_keys(&data, &lengths).unwrap(), keys.iter().map(String::as_str).collect::<Vec<_>>());
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(data in proptest::collection::vec(any::<u8>(), 0..64),
                                             lengths in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(keys) = decode_str_keys(&data, &lengths) {
                prop_assert_eq!(keys.iter().map(|k| k.len()).sum::<usize>(), data.len());
            }
        }
    }

    #[test]
    fn hash_is_stable_and_below_two_to_the_63() {
        // A changed hash would renumber every feature of every saved model.
        assert_eq!(
            key_hash("occupation=Sales"),
            xxh3_64(b"occupation=Sales") >> 1
        );
        assert!(key_hash("x") < 1 << 63);
    }
}
