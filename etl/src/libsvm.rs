//! The libsvm text format: `label index:value index:value ...` per line, indices 1-based by
//! convention. Read into Arrow as `label: Float64, idx: List<UInt64>, val:
//! List<Float64>`, indices shifted to 0-based.

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{Float64Builder, ListBuilder, RecordBatch, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::EtlError;
use crate::bad_rows::{BadRow, BadRowPolicy, BadRows, handle};
use crate::source::read_text;

/// The schema every libsvm file is read with.
pub fn schema() -> SchemaRef {
    let list = |t| DataType::List(Arc::new(Field::new_list_field(t, true)));
    Arc::new(Schema::new(vec![
        Field::new("label", DataType::Float64, false),
        Field::new("idx", list(DataType::UInt64), false),
        Field::new("val", list(DataType::Float64), false),
    ]))
}

/// Reads a libsvm file into one record batch. Bad lines follow `policy`.
pub fn read(path: &Path, policy: BadRowPolicy, skipped: &BadRows) -> Result<RecordBatch, EtlError> {
    let (file, text) = read_text(path)?;
    let mut labels = Float64Builder::new();
    let mut indices = ListBuilder::new(UInt64Builder::new());
    let mut values = ListBuilder::new(Float64Builder::new());
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok((label, pairs)) => {
                labels.append_value(label);
                for (k, v) in pairs {
                    indices.values().append_value(k);
                    values.values().append_value(v);
                }
                indices.append(true);
                values.append(true);
            }
            Err(reason) => {
                let row = BadRow {
                    file: file.clone(),
                    line: i as u64 + 1,
                    reason,
                };
                if let Some(row) = handle(policy, row, skipped) {
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
    let label: f64 = label
        .parse()
        .map_err(|_| format!("the label '{label}' is not a number"))?;
    let pairs = parts
        .map(|p| {
            let (k, v) = p
                .split_once(':')
                .ok_or_else(|| format!("'{p}' is not index:value"))?;
            let k: u64 = k
                .parse()
                .map_err(|_| format!("the index '{k}' is not a positive integer"))?;
            let v: f64 = v
                .parse()
                .map_err(|_| format!("the value '{v}' of index {k} is not a number"))?;
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
        std::fs::write(&path, "+1 3:1 10:0.5\n-1 1:2\n\n1 x:1\n").unwrap();
        let skipped = BadRows::default();
        let err = read(&path, BadRowPolicy::Fail, &skipped)
            .unwrap_err()
            .to_string();
        assert!(err.contains("d.libsvm:4: the index 'x'"), "{err}");
        let batch = read(&path, BadRowPolicy::Skip, &skipped).unwrap();
        assert_eq!(skipped.take().count, 1);
        assert_eq!(batch.num_rows(), 2);
        let idx = batch.column(1).as_list::<i32>().value(0);
        assert_eq!(
            idx.as_primitive::<UInt64Type>().values().to_vec(),
            vec![2, 9]
        );
    }
}
