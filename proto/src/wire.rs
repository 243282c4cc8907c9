//! Packed little-endian arrays: how keys and values cross the wire.
//!
//! A key array is `n * 8` bytes of u64; a value array is `n * size_of::<T>()` bytes. Decoding
//! checks lengths and never panics, whatever the bytes.

use bytes::Bytes;

use crate::{Element, PsError, Result};

#[cfg(target_endian = "big")]
compile_error!("angel-ps stores arrays in wire order and needs a little-endian target");

/// Packs keys into wire bytes.
pub fn encode_keys(keys: &[u64]) -> Bytes {
    Bytes::copy_from_slice(bytemuck::cast_slice(keys))
}

/// Packs values into wire bytes.
pub fn encode_values<T: Element>(values: &[T]) -> Bytes {
    Bytes::copy_from_slice(bytemuck::cast_slice(values))
}

/// Appends values to a wire buffer being built.
pub fn append_values<T: Element>(out: &mut Vec<u8>, values: &[T]) {
    out.extend_from_slice(bytemuck::cast_slice(values));
}

/// Unpacks a key array; `what` names the field for the error message.
pub fn decode_keys(bytes: &[u8], what: &str) -> Result<Vec<u64>> {
    decode(bytes, what)
}

/// Unpacks a value array of type `T`; `what` names the field for the error message.
pub fn decode_values<T: Element>(bytes: &[u8], what: &str) -> Result<Vec<T>> {
    decode(bytes, what)
}

/// Unpacks a value array straight into `dest`, which must have exactly its length.
pub fn decode_values_into<T: Element>(bytes: &[u8], dest: &mut [T], what: &str) -> Result<()> {
    let want = std::mem::size_of_val(dest);
    if bytes.len() != want {
        return Err(PsError::InvalidArgument(format!(
            "{what}: {} bytes for {} values of {} bytes",
            bytes.len(),
            dest.len(),
            std::mem::size_of::<T>()
        )));
    }
    bytemuck::cast_slice_mut::<T, u8>(dest).copy_from_slice(bytes);
    Ok(())
}

fn decode<T: bytemuck::Pod>(bytes: &[u8], what: &str) -> Result<Vec<T>> {
    let size = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return Err(PsError::InvalidArgument(format!(
            "{what}: {} bytes is not a whole number of {size}-byte elements",
            bytes.len()
        )));
    }
    Ok(bytemuck::pod_collect_to_vec(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn keys_round_trip(keys in proptest::collection::vec(any::<u64>(), 0..512)) {
            prop_assert_eq!(decode_keys(&encode_keys(&keys), "keys").unwrap(), keys);
        }

        #[test]
        fn f32_values_round_trip(values in proptest::collection::vec(any::<f32>(), 0..512)) {
            let back: Vec<f32> = decode_values(&encode_values(&values), "values").unwrap();
            prop_assert_eq!(bytemuck::cast_slice::<f32, u32>(&back), bytemuck::cast_slice::<f32, u32>(&values));
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            for (result, size) in [
                (decode_keys(&bytes, "keys").map(|v| v.len()), 8),
                (decode_values::<f32>(&bytes, "values").map(|v| v.len()), 4),
                (decode_values::<f64>(&bytes, "values").map(|v| v.len()), 8),
                (decode_values::<i64>(&bytes, "values").map(|v| v.len()), 8),
            ] {
                match result {
                    Ok(n) => prop_assert_eq!(n * size, bytes.len()),
                    Err(e) => {
                        prop_assert!(!bytes.len().is_multiple_of(size));
                        prop_assert!(e.to_string().contains("not a whole number"), "{}", e);
                    }
                }
            }
        }
    }

    #[test]
    fn values_decode_into_a_slice_of_the_same_length_only() {
        let mut dest = [0.0f32; 2];
        decode_values_into(&encode_values(&[1.0f32, 2.0]), &mut dest, "v").unwrap();
        assert_eq!(dest, [1.0, 2.0]);
        let err = decode_values_into(&encode_values(&[1.0f32]), &mut dest, "v").unwrap_err();
        assert!(err.to_string().contains("4 bytes for 2 values"), "{err}");
    }

    #[test]
    fn values_decode_from_unaligned_bytes() {
        let raw = encode_values(&[1.5f64, -2.0]);
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&raw);
        let back: Vec<f64> = decode_values(&shifted[1..], "values").unwrap();
        assert_eq!(back, vec![1.5, -2.0]);
    }
}
