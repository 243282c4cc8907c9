//! The libsvm text format: `label index:value index:value ...` per line, indices 1-based by
//! convention. Read into Arrow as `label: Float64, idx: List<UInt64>, val:
//! List<Float64>`, indices shifted to 0-based.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::{Float64Builder, ListBuilder, RecordBatch, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::EtlError;
use crate::bad_rows::{BadRow, BadRowPolicy, BadRows, handle};
use crate::source::{lines, read_bytes};

/// The schema every libsvm file is read with.
pub fn schema() -> SchemaRef {
    let list = |t| DataType::List(Arc::new(Field::new_list_field(t, true)));
    Arc::new(Schema::new(vec![
        Field::new("label", DataType::Float64, false),
        Field::new("idx", list(DataType::UInt64), false),
        Field::new("val", list(DataType::Float64), false),
    ]))
}

/// Options of `read_libsvm`, written as `read_csv`'s are: `key=value` pairs separated by `;`.
/// Today one key, `bad_rows` (`fail` or `skip`); a bare `skip` or `fail` is accepted too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LibsvmOptions {
    /// What to do with a line that does not parse.
    pub bad_rows: BadRowPolicy,
}

impl FromStr for LibsvmOptions {
    type Err = EtlError;
    fn from_str(s: &str) -> Result<Self, EtlError> {
        let mut o = LibsvmOptions::default();
        for pair in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or(("bad_rows", pair));
            match key.trim().to_ascii_lowercase().as_str() {
                "bad_rows" => o.bad_rows = value.trim().parse().map_err(EtlError::Options)?,
                other => {
                    return Err(EtlError::Options(format!(
                        "unknown libsvm option '{other}' (known: bad_rows)"
                    )));
                }
            }
        }
        Ok(o)
    }
}

/// Reads the libsvm file at `path` into one batch. A line that does not parse (invalid
/// UTF-8 included) fails the read, naming file and line, or is skipped and reported in
/// `skipped`, as `options.bad_rows` says.
pub fn read(
    path: &Path,
    options: LibsvmOptions,
    skipped: &BadRows,
) -> Result<RecordBatch, EtlError> {
    let file = path.display().to_string();
    let bytes = read_bytes(path)?;
    let mut labels = Float64Builder::new();
    let mut indices = ListBuilder::new(UInt64Builder::new());
    let mut values = ListBuilder::new(Float64Builder::new());
    for (line, text) in lines(&bytes) {
        let parsed = text.and_then(|text| {
            let text = text.split('#').next().unwrap_or_default().trim();
            match text.is_empty() {
                true => Ok(None),
                false => parse_line(text).map(Some),
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

fn parse_line(line: &str) -> Result<(f64, Vec<(u64, f64)>), String> {
    let mut parts = line.split_ascii_whitespace();
    let label = parts.next().unwrap_or_default();
    let label: f64 = match label.parse() {
        Ok(x) if f64::is_finite(x) => x,
        _ => return Err(format!("the label '{label}' is not a finite number")),
    };
    let pairs = parts
        .map(|p| {
            let (k, v) = p
                .split_once(':')
                .ok_or_else(|| format!("'{p}' is not index:value"))?;
            let k: u64 = k
                .parse()
                .map_err(|_| format!("the index '{k}' is not a positive integer"))?;
            let v: f64 = match v.parse() {
                Ok(x) if f64::is_finite(x) => x,
                _ => {
                    return Err(format!(
                        "the value '{v}' of index {k} is not a finite number"
                    ));
                }
            };
            let k = k
                .checked_sub(1)
                .ok_or_else(|| "index 0 in a 1-based libsvm file".to_string())?;
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
        let fail: LibsvmOptions = "".parse().unwrap();
        let err = read(&path, fail, &skipped).unwrap_err().to_string();
        assert!(err.contains("d.libsvm:4: the index 'x'"), "{err}");
        let skip: LibsvmOptions = "bad_rows = skip".parse().unwrap();
        assert_eq!(skip, "skip".parse().unwrap());
        let batch = read(&path, skip, &skipped).unwrap();
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
            if let Ok((label, pairs)) = parse_line(line.trim()) {
                assert!(label.is_finite(), "{line:?}");
                assert!(pairs.iter().all(|(_, v)| v.is_finite()), "{line:?}");
            }
        }
    }
}
