//! Push codecs: how a push slice's keys and values travel. The client encodes, the servers
//! decode, both through this file.
//!
//! - [`RAW`] (0): packed little-endian keys and values.
//! - [`SKETCHML`] (1): a [`crate::sketchml`] payload in `values` (keys inside it), for sparse
//!   float pushes of at least [`MIN_SKETCH_PAIRS`] pairs that come out smaller than raw.
//! - [`RICE_KEYS`] (2): keys as a count and Rice-coded gaps ([`crate::sketchml::keys`]), values
//!   raw: the pulls of a compressed matrix, whose keys would otherwise cost 8 bytes each.
//!
//! A matrix's pushes are compressed when its `compression` attribute says so (a model created
//! with `compression = sketchml(...)`); every client pushing to it then encodes the same way.

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;

use crate::sketchml::{self, SketchParams};
use crate::{Element, PsError, Result, ValueType, wire};

/// Codec tag of raw slices.
pub const RAW: u32 = 0;
/// Codec tag of SketchML slices (the payload carries its own version).
pub const SKETCHML: u32 = 1;
/// Codec tag of slices whose keys are Rice-coded and values raw.
pub const RICE_KEYS: u32 = 2;
/// Sparse pushes with fewer pairs go raw: bucket means and sketch headers would cost about
/// as much as they save. Larger ones go raw too when the payload is not smaller.
pub const MIN_SKETCH_PAIRS: usize = 16;

/// How a matrix's sparse pushes are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Compression {
    /// Raw keys and values.
    #[default]
    None,
    /// SketchML with these settings.
    SketchMl(SketchParams),
}

impl FromStr for Compression {
    type Err = PsError;

    /// `none`, `sketchml` (published defaults) or `sketchml(buckets, groups, rows, col_ratio)`.
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let bad = |why: &str| {
            PsError::InvalidArgument(format!(
                "compression '{s}': {why}; expected none, sketchml or \
                 sketchml(buckets, groups, rows, col_ratio)"
            ))
        };
        if s.eq_ignore_ascii_case("none") {
            return Ok(Compression::None);
        }
        let Some(rest) = s
            .get(..8)
            .filter(|p| p.eq_ignore_ascii_case("sketchml"))
            .map(|_| &s[8..])
        else {
            return Err(bad("unknown codec"));
        };
        let rest = rest.trim();
        if rest.is_empty() {
            return Ok(Compression::SketchMl(SketchParams::default()));
        }
        let inner = rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| bad("settings go in parentheses"))?;
        let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
        let [b, g, r, c] = parts.as_slice() else {
            return Err(bad("four settings are needed"));
        };
        let int = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| bad("buckets, groups and rows are integers"))
        };
        let params = SketchParams {
            buckets: int(b)?,
            groups: int(g)?,
            rows: int(r)?,
            col_ratio: c.parse().map_err(|_| bad("col_ratio is a number"))?,
        };
        params.validate()?;
        Ok(Compression::SketchMl(params))
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compression::None => write!(f, "none"),
            Compression::SketchMl(p) => write!(
                f,
                "sketchml({}, {}, {}, {})",
                p.buckets, p.groups, p.rows, p.col_ratio
            ),
        }
    }
}

/// When the pushes of a compressed matrix are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompressionMode {
    /// While the client measures compressed pushes to be faster than raw ones: on a fast link
    /// encoding costs more than it saves in transfer. Only the warm-up and the probes of the
    /// slower form cost time then (`angel_client::codec_choice`).
    #[default]
    Auto,
    /// Every push, whatever it costs in time (fewest bytes on the wire).
    Always,
}

impl FromStr for CompressionMode {
    type Err = PsError;

    /// `auto` or `always`.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(CompressionMode::Auto),
            "always" => Ok(CompressionMode::Always),
            _ => Err(PsError::InvalidArgument(format!(
                "compression_mode '{s}': expected auto or always"
            ))),
        }
    }
}

impl fmt::Display for CompressionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompressionMode::Auto => "auto",
            CompressionMode::Always => "always",
        })
    }
}

/// One push slice as sent: codec tag, keys bytes, values bytes.
pub struct Encoded {
    /// [`RAW`] or [`SKETCHML`].
    pub codec: u32,
    /// Packed keys (empty for SketchML: the payload holds them).
    pub keys: Bytes,
    /// Packed values, or the SketchML payload.
    pub values: Bytes,
}

/// Encodes a sparse push slice: SketchML when `compression` asks for it, the values are
/// floats, the slice has at least [`MIN_SKETCH_PAIRS`] pairs and the payload comes out
/// smaller than raw; raw otherwise.
pub fn encode_slice<T: Element>(compression: &Compression, keys: &[u64], values: &[T]) -> Encoded {
    let raw = || Encoded {
        codec: RAW,
        keys: wire::encode_keys(keys),
        values: wire::encode_values(values),
    };
    let Compression::SketchMl(params) = compression else {
        return raw();
    };
    let float = matches!(T::VALUE_TYPE, ValueType::F32 | ValueType::F64);
    if !float || keys.len() < MIN_SKETCH_PAIRS {
        return raw();
    }
    let widened: Vec<f64> = values.iter().map(|v| v.to_f64()).collect();
    let raw_len = keys.len() * (8 + std::mem::size_of::<T>());
    match sketchml::encode(keys, &widened, params) {
        Ok(payload) if payload.len() < raw_len => Encoded {
            codec: SKETCHML,
            keys: Bytes::new(),
            values: Bytes::from(payload),
        },
        _ => raw(),
    }
}

/// Encodes the keys of a pull slice: Rice-coded when the matrix is compressed and that is
/// smaller, packed otherwise. Returns the codec tag and the keys field.
pub fn encode_keys(compression: &Compression, keys: &[u64]) -> (u32, Bytes) {
    if *compression == Compression::None || keys.len() < MIN_SKETCH_PAIRS || !keys.is_sorted() {
        return (RAW, wire::encode_keys(keys));
    }
    let mut out = Vec::new();
    sketchml::bits::put_varint(&mut out, keys.len() as u64);
    sketchml::keys::encode(keys, &mut out);
    match out.len() < keys.len() * 8 {
        true => (RICE_KEYS, Bytes::from(out)),
        false => (RAW, wire::encode_keys(keys)),
    }
}

/// Decodes a pull or push slice into raw keys and values of `value_type`; raw slices pass
/// through.
/// Unknown codecs, non-float matrices and broken payloads are INVALID_ARGUMENT.
pub fn decode_slice(
    codec: u32,
    keys: Bytes,
    values: Bytes,
    value_type: ValueType,
    max_pairs: usize,
) -> Result<(Bytes, Bytes)> {
    match codec {
        RAW => Ok((keys, values)),
        SKETCHML => {
            if !keys.is_empty() {
                return Err(PsError::InvalidArgument(
                    "sketchml slice: keys travel inside the payload, the keys field must be empty"
                        .into(),
                ));
            }
            let (keys, decoded) = sketchml::decode(&values, max_pairs)?;
            let values = match value_type {
                ValueType::F32 => wire::encode_values(&narrow::<f32>(&decoded)),
                ValueType::F64 => wire::encode_values(&decoded),
                other => {
                    return Err(PsError::InvalidArgument(format!(
                        "sketchml compresses float values; the matrix holds {other:?}"
                    )));
                }
            };
            Ok((wire::encode_keys(&keys), values))
        }
        RICE_KEYS => {
            let mut r = sketchml::bits::Reader::new(&keys);
            let n = r.count(1, "key count")?;
            sketchml::check_pairs(n, max_pairs)?;
            let decoded = sketchml::keys::decode(&mut r, n)?;
            if r.remaining() != 0 {
                return Err(r.corrupt("trailing bytes after the keys"));
            }
            Ok((wire::encode_keys(&decoded), values))
        }
        other => Err(PsError::InvalidArgument(format!(
            "slice codec {other} is not supported by this server (0 = raw, 1 = sketchml \
             version {}, 2 = Rice-coded keys)",
            sketchml::VERSION
        ))),
    }
}

fn narrow<T: Element>(values: &[f64]) -> Vec<T> {
    values.iter().map(|&v| T::from_f64(v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_parses_and_prints() {
        assert_eq!("none".parse::<Compression>().unwrap(), Compression::None);
        let default: Compression = "sketchml".parse().unwrap();
        assert_eq!(default, Compression::SketchMl(SketchParams::default()));
        let custom: Compression = "SketchML(128, 4, 3, 0.5)".parse().unwrap();
        assert_eq!(custom.to_string(), "sketchml(128, 4, 3, 0.5)");
        for bad in [
            "zstd",
            "sketchml(1, 1, 1, 1)",
            "sketchml(256, 8)",
            "sketchml 256",
        ] {
            assert!(bad.parse::<Compression>().is_err(), "{bad}");
        }
    }

    #[test]
    fn compression_mode_parses_and_prints() {
        for mode in [CompressionMode::Auto, CompressionMode::Always] {
            assert_eq!(mode.to_string().parse::<CompressionMode>().unwrap(), mode);
        }
        assert_eq!(
            " ALWAYS ".parse::<CompressionMode>().unwrap(),
            CompressionMode::Always
        );
        let e = "sometimes".parse::<CompressionMode>().unwrap_err();
        assert!(
            e.to_string().contains("compression_mode 'sometimes'"),
            "{e}"
        );
    }

    #[test]
    fn small_or_integer_pushes_go_raw_and_large_float_ones_compress() {
        let sketch = Compression::SketchMl(SketchParams::default());
        let keys: Vec<u64> = (0..10_000).map(|k| k * 3).collect();
        let values: Vec<f32> = (0..10_000)
            .map(|i| ((i % 97) as f32 - 48.0) * 1e-3)
            .collect();
        assert_eq!(encode_slice(&sketch, &keys[..10], &values[..10]).codec, RAW);
        let ints: Vec<i64> = vec![1; keys.len()];
        assert_eq!(encode_slice(&sketch, &keys, &ints).codec, RAW);
        let e = encode_slice(&sketch, &keys, &values);
        assert_eq!(e.codec, SKETCHML);
        assert!(
            e.values.len() * 4 < keys.len() * 12,
            "{} bytes",
            e.values.len()
        );
        // A receiver's cap on decoded pairs refuses the payload before decoding it.
        let err = decode_slice(
            e.codec,
            e.keys.clone(),
            e.values.clone(),
            ValueType::F32,
            9_999,
        );
        let err = err.unwrap_err();
        assert!(matches!(err, PsError::TooLarge(_)), "{err}");
        assert!(err.to_string().contains("10000 pairs"), "{err}");
        let (k, v) = decode_slice(e.codec, e.keys, e.values, ValueType::F32, usize::MAX).unwrap();
        assert_eq!(k.len(), keys.len() * 8);
        assert_eq!(v.len(), keys.len() * 4);
        let err =
            decode_slice(9, Bytes::new(), Bytes::new(), ValueType::F32, usize::MAX).unwrap_err();
        assert!(err.to_string().contains("codec 9"), "{err}");
        let (tag, packed) = encode_keys(&sketch, &keys);
        assert_eq!(tag, RICE_KEYS);
        assert!(packed.len() * 4 < keys.len() * 8, "{} bytes", packed.len());
        let (k, _) = decode_slice(
            tag,
            packed.clone(),
            Bytes::new(),
            ValueType::F32,
            usize::MAX,
        )
        .unwrap();
        assert_eq!(k, wire::encode_keys(&keys));
        let capped = decode_slice(tag, packed.clone(), Bytes::new(), ValueType::F32, 10);
        assert!(matches!(capped, Err(PsError::TooLarge(_))));
        let cut = packed.slice(..packed.len() / 2);
        assert!(decode_slice(tag, cut, Bytes::new(), ValueType::F32, usize::MAX).is_err());
    }
}
