//! CSV into Arrow, for raw data as it comes: with or without a header, any one-byte
//! delimiter, null tokens such as `?`, spaces around values, and typed columns whose bad
//! values are reported by file, line and column.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Float64Builder, Int64Builder, RecordBatch, StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::EtlError;
use crate::bad_rows::{BadRow, BadRowPolicy, handle};

/// Rows sampled to infer column types when none are given.
const INFER_ROWS: usize = 1000;

/// How to read a CSV file.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvOptions {
    /// The first line names the columns.
    pub header: bool,
    /// Field separator.
    pub delimiter: u8,
    /// Values read as null (besides the empty string).
    pub nulls: Vec<String>,
    /// Column names and types (`int`, `double`, `string`); taken from the header and inferred
    /// from the first rows when empty.
    pub columns: Vec<(String, DataType)>,
    /// What to do with rows that do not parse.
    pub bad_rows: BadRowPolicy,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            header: true,
            delimiter: b',',
            nulls: Vec::new(),
            columns: Vec::new(),
            bad_rows: BadRowPolicy::Fail,
        }
    }
}

impl FromStr for CsvOptions {
    type Err = EtlError;

    /// Parses `key=value` pairs separated by `;`: `header=false; delimiter=,; nulls=?|NA;
    /// columns=age int, name string; bad_rows=skip`.
    fn from_str(s: &str) -> Result<Self, EtlError> {
        let mut o = CsvOptions::default();
        for pair in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = |why: String| EtlError::Options(format!("CSV option '{pair}': {why}"));
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad("expected key=value".into()))?;
            let value = value.trim();
            match key.trim() {
                "header" => {
                    o.header = value
                        .parse()
                        .map_err(|_| bad("expected true or false".into()))?
                }
                "delimiter" => {
                    let value = if value == "\\t" { "\t" } else { value };
                    o.delimiter = match value.as_bytes() {
                        [b] => *b,
                        _ => return Err(bad("the delimiter must be one byte".into())),
                    }
                }
                "nulls" => o.nulls = value.split('|').map(|n| n.trim().to_string()).collect(),
                "columns" => {
                    o.columns = value
                        .split(',')
                        .map(parse_column)
                        .collect::<Result<_, _>>()
                        .map_err(bad)?
                }
                "bad_rows" => o.bad_rows = value.parse().map_err(bad)?,
                other => return Err(bad(format!("unknown option '{other}'"))),
            }
        }
        Ok(o)
    }
}

fn parse_column(spec: &str) -> Result<(String, DataType), String> {
    let mut words = spec.split_whitespace();
    let name = words.next().ok_or("an empty column")?.to_string();
    let ty = match words
        .next()
        .unwrap_or("string")
        .to_ascii_lowercase()
        .as_str()
    {
        "int" | "integer" | "bigint" | "int64" => DataType::Int64,
        "double" | "float" | "real" | "float64" => DataType::Float64,
        "string" | "text" | "varchar" | "utf8" => DataType::Utf8,
        other => {
            return Err(format!(
                "column '{name}': unknown type '{other}' (int, double or string)"
            ));
        }
    };
    Ok((name, ty))
}

/// Reads a CSV file into one record batch, row by row: each row is checked against the
/// schema before anything is appended, so a skipped row leaves no trace.
pub fn read(path: &Path, options: &CsvOptions) -> Result<RecordBatch, EtlError> {
    let file = path.display().to_string();
    let csv_error = |e: csv::Error| EtlError::Csv(file.clone(), e.to_string());
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(options.header)
        .delimiter(options.delimiter)
        .trim(csv::Trim::All)
        .flexible(true)
        .buffer_capacity(1 << 20)
        .from_path(path)
        .map_err(csv_error)?;
    let header: Vec<String> = match options.header {
        true => reader
            .headers()
            .map_err(csv_error)?
            .iter()
            .map(String::from)
            .collect(),
        false => Vec::new(),
    };
    let mut records = reader.records();
    let sample: Vec<csv::StringRecord> = records
        .by_ref()
        .take(INFER_ROWS)
        .collect::<Result<_, _>>()
        .map_err(csv_error)?;
    let schema = schema(options, &header, &sample);
    let mut columns: Vec<Column> = schema
        .fields()
        .iter()
        .map(|f| Column::new(f.data_type()))
        .collect();
    let is_null = |v: &str| v.is_empty() || options.nulls.iter().any(|n| n == v);
    for record in sample.into_iter().map(Ok).chain(records) {
        let record = record.map_err(csv_error)?;
        match check(&record, &schema, &is_null) {
            Ok(()) => columns
                .iter_mut()
                .zip(&record)
                .for_each(|(c, v)| c.append((!is_null(v)).then_some(v))),
            Err(reason) => {
                let line = record.position().map_or(0, |p| p.line());
                if let Some(row) = handle(
                    options.bad_rows,
                    BadRow {
                        file: file.clone(),
                        line,
                        reason,
                    },
                ) {
                    return Err(EtlError::BadRow(row));
                }
            }
        }
    }
    let arrays: Vec<ArrayRef> = columns.into_iter().map(Column::finish).collect();
    Ok(RecordBatch::try_new(schema, arrays)?)
}

/// Validates one record against the schema without building anything, so a bad row leaves
/// the columns untouched.
fn check(
    record: &csv::StringRecord,
    schema: &Schema,
    is_null: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    if record.len() != schema.fields().len() {
        return Err(format!(
            "expected {} columns, found {}",
            schema.fields().len(),
            record.len()
        ));
    }
    for (i, (field, value)) in schema.fields().iter().zip(record).enumerate() {
        let ok = is_null(value)
            || match field.data_type() {
                DataType::Int64 => value.parse::<i64>().is_ok(),
                DataType::Float64 => value.parse::<f64>().is_ok(),
                _ => true,
            };
        if !ok {
            return Err(format!(
                "column {} ('{}'): cannot read '{value}' as {}",
                i + 1,
                field.name(),
                field.data_type()
            ));
        }
    }
    Ok(())
}

/// The given columns, or header names (`c1..cN` without a header) with types inferred from
/// the first rows of the right width.
fn schema(options: &CsvOptions, header: &[String], sample: &[csv::StringRecord]) -> SchemaRef {
    let columns = match options.columns.is_empty() {
        false => options.columns.clone(),
        true => {
            let width = if header.is_empty() {
                sample.first().map_or(0, |r| r.len())
            } else {
                header.len()
            };
            let sample: Vec<&csv::StringRecord> =
                sample.iter().filter(|r| r.len() == width).collect();
            (0..width)
                .map(|i| {
                    let name = header
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| format!("c{}", i + 1));
                    let values = sample
                        .iter()
                        .map(|r| &r[i])
                        .filter(|v| !v.is_empty() && !options.nulls.iter().any(|n| n == v));
                    (name, infer(values))
                })
                .collect()
        }
    };
    Arc::new(Schema::new(
        columns
            .into_iter()
            .map(|(n, t)| Field::new(n, t, true))
            .collect::<Vec<_>>(),
    ))
}

fn infer<'a>(mut values: impl Iterator<Item = &'a str> + Clone) -> DataType {
    if values.clone().all(|v| v.parse::<i64>().is_ok()) {
        DataType::Int64
    } else if values.all(|v| v.parse::<f64>().is_ok()) {
        DataType::Float64
    } else {
        DataType::Utf8
    }
}

/// A column being built.
enum Column {
    Int(Int64Builder),
    Float(Float64Builder),
    Text(StringBuilder),
}

impl Column {
    fn new(t: &DataType) -> Self {
        match t {
            DataType::Int64 => Column::Int(Int64Builder::new()),
            DataType::Float64 => Column::Float(Float64Builder::new()),
            _ => Column::Text(StringBuilder::new()),
        }
    }

    /// Appends a value already checked to parse.
    fn append(&mut self, v: Option<&str>) {
        match self {
            Column::Int(b) => b.append_option(v.and_then(|v| v.parse().ok())),
            Column::Float(b) => b.append_option(v.and_then(|v| v.parse().ok())),
            Column::Text(b) => b.append_option(v),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Column::Int(mut b) => Arc::new(b.finish()),
            Column::Float(mut b) => Arc::new(b.finish()),
            Column::Text(mut b) => Arc::new(b.finish()),
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    use super::*;

    #[test]
    fn reads_raw_rows_and_names_each_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("people.csv");
        std::fs::write(
            &path,
            "39, State-gov, 13\n50, ?, 9\n38, Private\n41, Private, lots\n",
        )
        .unwrap();
        let mut options: CsvOptions =
            "header=false; nulls=?; columns=age int, work string, years int"
                .parse()
                .unwrap();
        let err = read(&path, &options).unwrap_err().to_string();
        assert!(
            err.contains("people.csv:3: expected 3 columns, found 2"),
            "{err}"
        );
        options.bad_rows = BadRowPolicy::Skip;
        let before = crate::bad_rows::skipped().lock().unwrap().count();
        let batch = read(&path, &options).unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(
            crate::bad_rows::skipped().lock().unwrap().count() - before,
            2
        );
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(1), 50);
        assert!(batch.column(1).is_null(1), "'?' reads as null");
        assert_eq!(
            batch.column(1).as_string::<i32>().value(0),
            "State-gov",
            "spaces trimmed"
        );
        let options: CsvOptions = "header=false".parse().unwrap();
        std::fs::write(&path, "1,a\n2,b\n").unwrap();
        let batch = read(&path, &options).unwrap();
        assert_eq!(batch.schema().field(0).data_type(), &DataType::Int64);
        assert_eq!(batch.schema().field(1).name(), "c2");
        assert!("columns=x complex".parse::<CsvOptions>().is_err());
    }
}
