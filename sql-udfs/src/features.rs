//! [`Features`]: a feature column (a string or a list of strings per row) as each batch's
//! distinct feature strings and, per feature slot, a code into them. Counting, indexing and
//! hashing then cost one hash per distinct feature of a batch instead of one per cell:
//! `ps_feature` returns dictionary-encoded strings and `make_array` keeps them so, and a
//! column of plain strings is dictionary-encoded here, once.

use std::ops::Range;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::common::{Result, exec_err};

use angel_etl::udf_args::{is_string, list_element, list_of};

use crate::args::Arg;

/// The code of a NULL feature slot, which carries no feature.
const NULL: u32 = u32::MAX;

/// The type a feature argument is computed on: dictionary-encoded strings stay so (a cast
/// would build every string again), other strings become Utf8; either alone or in a list.
pub fn features_type(arg: Arg, t: &DataType) -> Result<DataType> {
    let keep = |e: &DataType| match e {
        DataType::Dictionary(_, v) if v.is_string() => e.clone(),
        _ => DataType::Utf8,
    };
    match list_element(t) {
        Some(e) if is_string(e) || e.is_null() => Ok(list_of(keep(e))),
        None if is_string(t) || t.is_null() => Ok(keep(t)),
        _ => arg.error("a string or a list of strings", t),
    }
}

/// See the module documentation.
pub struct Features {
    /// Row r owns `codes[rows[r]]` (empty for null rows).
    rows: Vec<Range<usize>>,
    /// Per feature slot: its string's position in `strings`, or [`NULL`].
    codes: Vec<u32>,
    /// The strings codes point at; a string may repeat or go unused.
    strings: StringArray,
}

impl Features {
    /// Reads a feature column of `function`.
    pub fn from_array(function: &str, array: &ArrayRef) -> Result<Self> {
        let (rows, flat) = match array.data_type() {
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                let offsets = list.value_offsets();
                let first = offsets[0] as usize;
                let rows = (0..list.len())
                    .map(|r| match list.is_null(r) {
                        true => 0..0,
                        false => offsets[r] as usize - first..offsets[r + 1] as usize - first,
                    })
                    .collect();
                let last = offsets[list.len()] as usize;
                (rows, list.values().slice(first, last - first))
            }
            t if is_string(t) => ((0..array.len()).map(|r| r..r + 1).collect(), array.clone()),
            other => {
                return exec_err!(
                    "{function}: features must be strings or a list of strings, got {other}"
                );
            }
        };
        let (codes, strings) = encode(function, &flat)?;
        Ok(Features {
            rows,
            codes,
            strings,
        })
    }

    /// Number of feature slots over all rows (an upper bound on the features), for sizing
    /// outputs up front.
    pub fn slots(&self) -> usize {
        self.codes.len()
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// The codes of the non-null features of row `r`.
    pub fn row(&self, r: usize) -> impl Iterator<Item = usize> + '_ {
        self.codes[self.rows[r].clone()]
            .iter()
            .filter(|&&c| c != NULL)
            .map(|&c| c as usize)
    }

    /// Number of codes: every code is below it.
    pub fn distinct(&self) -> usize {
        self.strings.len()
    }

    /// The feature string of `code`.
    pub fn string(&self, code: usize) -> &str {
        self.strings.value(code)
    }

    /// How often each code occurs in the rows.
    pub fn counts(&self) -> Vec<u32> {
        let mut counts = vec![0u32; self.distinct()];
        for r in 0..self.rows() {
            for c in self.row(r) {
                counts[c] += 1;
            }
        }
        counts
    }
}

/// Codes and strings of the flat feature array: a dictionary's keys and values as they are,
/// plain strings dictionary-encoded (one hash per cell, the last per-cell hash).
fn encode(function: &str, flat: &ArrayRef) -> Result<(Vec<u32>, StringArray)> {
    let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let Ok(encoded) = cast(flat, &dictionary) else {
        return exec_err!(
            "{function}: features must be strings, got {}",
            flat.data_type()
        );
    };
    let encoded = encoded.as_dictionary::<Int32Type>();
    let strings = encoded.values().as_string::<i32>().clone();
    let keys = encoded.keys();
    let codes = keys
        .iter()
        .map(|k| match k {
            Some(k) if strings.is_valid(k as usize) => k as u32,
            _ => NULL,
        })
        .collect();
    Ok((codes, strings))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{DictionaryArray, Int32Array, ListArray, StringArray};
    use datafusion::arrow::buffer::OffsetBuffer;
    use datafusion::arrow::datatypes::{Field, Int32Type};

    use std::sync::Arc;

    use super::*;

    fn column(array: impl Array + 'static) -> ArrayRef {
        Arc::new(array)
    }

    fn strings_of(f: &Features, r: usize) -> Vec<&str> {
        f.row(r).map(|c| f.string(c)).collect()
    }

    #[test]
    fn plain_and_dictionary_lists_read_the_same() {
        let plain = StringArray::from(vec![Some("a=1"), None, Some("b=2"), Some("a=1")]);
        let dict: DictionaryArray<Int32Type> = vec![Some("a=1"), None, Some("b=2"), Some("a=1")]
            .into_iter()
            .collect();
        for values in [column(plain), column(dict)] {
            let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
            let list = ListArray::new(
                field,
                OffsetBuffer::from_lengths([3, 0, 1]),
                values,
                Some(vec![true, false, true].into()),
            );
            let f = Features::from_array("t", &column(list)).unwrap();
            assert_eq!(f.rows(), 3);
            assert_eq!(strings_of(&f, 0), ["a=1", "b=2"]);
            assert!(strings_of(&f, 1).is_empty());
            assert_eq!(strings_of(&f, 2), ["a=1"]);
            let counts = f.counts();
            assert_eq!(counts.iter().sum::<u32>(), 3);
            assert_eq!(counts[f.row(0).next().unwrap()], 2, "a=1 twice, one code");
        }
    }

    #[test]
    fn a_sliced_list_reads_its_own_rows() {
        let values = column(StringArray::from(vec!["x", "y", "z"]));
        let field = Arc::new(Field::new_list_field(DataType::Utf8, true));
        let list = ListArray::new(field, OffsetBuffer::from_lengths([1, 2]), values, None);
        let f = Features::from_array("t", &column(list.slice(1, 1))).unwrap();
        assert_eq!(strings_of(&f, 0), ["y", "z"]);
    }

    #[test]
    fn other_types_are_refused_by_name() {
        let err = Features::from_array("ps_index", &column(Int32Array::from(vec![1])))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("ps_index: features must be strings"), "{err}");
    }
}
