//! Angel's sparse text formats, read into Arrow as `label: Float64, idx: List<UInt64>, val:
//! List<Float64>` with 0-based indices:
//!
//! - `libsvm`: `label index:value index:value ...`, indices 1-based by convention
//!   (`index_base=0` for files that count from 0, as Angel writes them);
//! - `dummy`: `label index index ...`, every listed feature with value 1, indices 0-based
//!   as Angel writes them (`index_base=1` for files that count from 1).

use std::io::BufReader;
use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::{Float64Builder, ListBuilder, RecordBatch, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::EtlError;
use crate::bad_rows::{BadRow, BadRowPolicy, BadRows, handle};
use angel_storage::read::open;
use angel_storage::{Location, StorageError};

use crate::source::Lines;

/// The schema every libsvm or dummy file is read with.
pub fn schema() -> SchemaRef {
    let list = |t| DataType::List(Arc::new(Field::new_list_field(t, true)));
    Arc::new(Schema::new(vec![
        Field::new("label", DataType::Float64, false),
        Field::new("idx", list(DataType::UInt64), false),
        Field::new("val", list(DataType::Float64), false),
    ]))
}

/// Which of Angel's sparse formats a file is in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SparseFormat {
    /// `label index:value ...`.
    #[default]
    Libsvm,
    /// `label index index ...`, each value 1.
    Dummy,
}

/// Options of `read_libsvm`, written as `read_csv`'s are: `key=value` pairs separated by `;`.
/// `format` (`libsvm` or `dummy`), `index_base` (`0` or `1`; by default 1 for libsvm and 0
/// for dummy) and `bad_rows` (`fail` or `skip`; a bare `skip` or `fail` is accepted too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LibsvmOptions {
    /// The line format.
    pub format: SparseFormat,
    /// The file's first index (0 or 1); `None` for the format's convention.
    pub index_base: Option<u64>,
    /// What to do with a line that does not parse.
    pub bad_rows: BadRowPolicy,
}

impl LibsvmOptions {
    /// The index the file counts from.
    fn base(&self) -> u64 {
        self.index_base.unwrap_or(match self.format {
            SparseFormat::Libsvm => 1,
            SparseFormat::Dummy => 0,
        })
    }
}

impl FromStr for LibsvmOptions {
    type Err = EtlError;
    fn from_str(s: &str) -> Result<Self, EtlError> {
        let mut o = LibsvmOptions::default();
        for pair in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or(("bad_rows", pair));
            let value = value.trim();
            let bad = |expected: &str| {
                EtlError::Options(format!(
                    "libsvm option '{pair}': expected {expected}, got '{value}'"
                ))
            };
            match key.trim().to_ascii_lowercase().as_str() {
                "bad_rows" => o.bad_rows = value.parse().map_err(EtlError::Options)?,
                "format" => {
                    o.format = match value.to_ascii_lowercase().as_str() {
                        "libsvm" => SparseFormat::Libsvm,
                        "dummy" => SparseFormat::Dummy,
                        _ => return Err(bad("libsvm or dummy")),
                    }
                }
                "index_base" => {
                    o.index_base = match value {
                        "0" => Some(0),
                        "1" => Some(1),
                        _ => return Err(bad("0 or 1")),
                    }
                }
                other => {
                    return Err(EtlError::Options(format!(
                        "unknown libsvm option '{other}' (known: format, index_base, bad_rows)"
                    )));
                }
            }
        }
        Ok(o)
    }
}

/// Reads the files at `files` into one batch each, line by line as they stream from their
/// store. A line that does not parse (invalid UTF-8 included) fails the read, naming file and
/// line, or is skipped and reported in `skipped`, as `options.bad_rows` says.
pub fn read(
    files: &[Location],
    options: LibsvmOptions,
    skipped: &BadRows,
) -> Result<Vec<RecordBatch>, EtlError> {
    files
        .iter()
        .map(|file| read_file(file, options, skipped))
        .collect()
}

fn read_file(
    location: &Location,
    options: LibsvmOptions,
    skipped: &BadRows,
) -> Result<RecordBatch, EtlError> {
    let file = location.to_string();
    let mut lines = Lines::new(BufReader::with_capacity(1 << 20, open(location)?));
    let mut labels = Float64Builder::new();
    let mut indices = ListBuilder::new(UInt64Builder::new());
    let mut values = ListBuilder::new(Float64Builder::new());
    let io = |e| StorageError::io(location, e);
    while let Some((line, text)) = lines.next_line().map_err(io)? {
        let parsed = text.and_then(|text| {
            let text = text.split('#').next().unwrap_or_default().trim();
            match text.is_empty() {
                true => Ok(None),
                false => parse_line(text, &options).map(Some),
            }
        });
        match parsed {
            Ok(None) => {}
            Ok(Some((label, pairs))) => {
                labels.append_value(label);
                for (k, v) in pairs {
                    indices.values().append_value(k);
                    values.values().append_value(v);
                }
                indices.append(true);
                values.append(true);
            }
            Err(reason) => {
                let file = file.clone();
                let row = BadRow { file, line, reason };
                if let Some(row) = handle(options.bad_rows, row, skipped) {
                    return Err(EtlError::BadRow(row));
                }
            }
        }
    }
    let columns = vec![
        Arc::new(labels.finish()) as _,
        Arc::new(indices.finish()) as _,
        Arc::new(values.finish()) as _,
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// One line's label and (0-based index, value) pairs, or why it does not parse.
fn parse_line(line: &str, options: &LibsvmOptions) -> Result<(f64, Vec<(u64, f64)>), String> {
    let mut parts = line.split_ascii_whitespace();
    let label = parts.next().unwrap_or_default();
    let label: f64 = match label.parse() {
        Ok(x) if f64::is_finite(x) => x,
        _ => return Err(format!("the label '{label}' is not a finite number")),
    };
    let base = options.base();
    let pairs = parts
        .map(|p| {
            let (k, v) = match options.format {
                SparseFormat::Libsvm => p
                    .split_once(':')
                    .ok_or_else(|| format!("'{p}' is not index:value"))?,
                SparseFormat::Dummy => (p, "1"),
            };
            let k: u64 = k
                .parse()
                .map_err(|_| format!("the index '{k}' is not a whole number"))?;
            let v: f64 = match v.parse() {
                Ok(x) if f64::is_finite(x) => x,
                _ => {
                    return Err(format!(
                        "the value '{v}' of index {k} is not a finite number"
                    ));
                }
            };
            let k = k.checked_sub(base).ok_or_else(|| {
                format!(
                    "index {k} in a file read with index_base={base}; set index_base=0 if its \
                     indices count from 0"
                )
            })?;
            Ok((k, v))
        })
        .collect::<Result<_, String>>()?;
    Ok((label, pairs))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::UInt64Type;

    use super::*;

    #[test]
    fn reads_rows_and_reports_bad_lines_by_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.libsvm");
        let mut text = b"+1 3:1 10:0.5\n-1 1:2\n\n1 x:1\n1 2:nan\ninf 1:1\n".to_vec();
        text.extend_from_slice(b"1 1:\xff\n");
        std::fs::write(&path, text).unwrap();
        let skipped = BadRows::default();
        let location = [Location::parse(path.to_str().unwrap()).unwrap()];
        let fail: LibsvmOptions = "".parse().unwrap();
        let err = read(&location, fail, &skipped).unwrap_err().to_string();
        assert!(err.contains("d.libsvm:4: the index 'x'"), "{err}");
        let skip: LibsvmOptions = "bad_rows = skip".parse().unwrap();
        assert_eq!(skip, "skip".parse().unwrap());
        let batch = read(&location, skip, &skipped).unwrap().remove(0);
        let report = skipped.take();
        assert_eq!(report.count, 4);
        let reasons: Vec<String> = report.first.iter().map(|r| r.to_string()).collect();
        assert!(reasons[1].contains(":5: the value 'nan' of index 2 is not a finite"));
        assert!(reasons[2].contains(":6: the label 'inf'"));
        assert!(reasons[3].contains(":7: invalid UTF-8"), "{reasons:?}");
        let err = "header=true".parse::<LibsvmOptions>().unwrap_err();
        assert!(err.to_string().contains("unknown libsvm option 'header'"));
        assert_eq!(batch.num_rows(), 2);
        let idx = batch.column(1).as_list::<i32>().value(0);
        assert_eq!(
            idx.as_primitive::<UInt64Type>().values().to_vec(),
            vec![2, 9]
        );
    }

    #[test]
    fn zero_based_and_dummy_files_read_with_their_options() {
        let options = |text: &str| text.parse::<LibsvmOptions>().unwrap();
        let err = parse_line("1 0:1 4:2", &options("")).unwrap_err();
        assert!(
            err.contains("index 0") && err.contains("index_base=0"),
            "{err}"
        );
        let zero = parse_line("1 0:1 4:2", &options("index_base=0")).unwrap();
        assert_eq!(zero, (1.0, vec![(0, 1.0), (4, 2.0)]));
        let dummy = parse_line("0 0 7 3", &options("format=dummy")).unwrap();
        assert_eq!(dummy, (0.0, vec![(0, 1.0), (7, 1.0), (3, 1.0)]));
        let dummy1 = parse_line("1 1 8", &options("format = dummy; index_base = 1")).unwrap();
        assert_eq!(dummy1, (1.0, vec![(0, 1.0), (7, 1.0)]));
        assert!(parse_line("1 2:1", &options("format=dummy")).is_err());
        for bad in ["index_base=2", "format=dense"] {
            let err = bad.parse::<LibsvmOptions>().unwrap_err().to_string();
            assert!(err.contains(bad.split('=').nth(1).unwrap()), "{err}");
        }
    }

    #[test]
    fn random_lines_parse_or_fail_without_panicking() {
        let alphabet: Vec<char> = "0123456789:.-+ eE\tnaif#x".chars().collect();
        let mut state = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 24) as usize;
            let line: String = (0..len)
                .map(|i| alphabet[((state >> (i % 8 * 8)) as usize + i) % alphabet.len()])
                .collect();
            if let Ok((label, pairs)) = parse_line(line.trim(), &LibsvmOptions::default()) {
                assert!(label.is_finite(), "{line:?}");
                assert!(pairs.iter().all(|(_, v)| v.is_finite()), "{line:?}");
            }
        }
    }
}
