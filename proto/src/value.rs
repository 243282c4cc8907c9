//! The element types a matrix can hold, and how they convert.

use crate::ValueType;

/// A matrix element: f32 or f64 for model weights, i64 for counts.
///
/// Generic code over `Element` serves every value type, so no function exists once per type.
pub trait Element:
    bytemuck::Pod + Default + PartialEq + PartialOrd + std::fmt::Debug + Send + Sync + 'static
{
    /// The wire tag of this type.
    const VALUE_TYPE: ValueType;
    /// Widens to f64 (PS functions compute in f64).
    fn to_f64(self) -> f64;
    /// Narrows from f64 (rounding to the nearest representable value).
    fn from_f64(v: f64) -> Self;
    /// `self + other`; wrapping for integers so no input can panic a server.
    fn plus(self, other: Self) -> Self;
}

macro_rules! float_element {
    ($t:ty, $tag:ident) => {
        impl Element for $t {
            const VALUE_TYPE: ValueType = ValueType::$tag;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn plus(self, other: Self) -> Self {
                self + other
            }
        }
    };
}
float_element!(f32, F32);
float_element!(f64, F64);

impl Element for i64 {
    const VALUE_TYPE: ValueType = ValueType::I64;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v.round() as i64
    }
    fn plus(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
}

/// Bytes one element of `value_type` takes on the wire and in dense storage.
pub fn value_size(value_type: ValueType) -> usize {
    match value_type {
        ValueType::F32 => 4,
        ValueType::F64 | ValueType::I64 | ValueType::Unspecified => 8,
    }
}
