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
use crate::bad_rows::{BadRow, BadRowPolicy, BadRows, handle};
use crate::source::read_bytes;

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

/// Files at least this large, without quote characters, are parsed in parallel chunks.
const PARALLEL_BYTES: usize = 8 << 20;

/// Reads a CSV file into record batches (one per parsed chunk, in file order), row by row: each row is checked against the
/// schema before anything is appended, so a skipped row leaves no trace. Large files without
/// quotes (so every newline ends a row) are cut at newlines and parsed on every core.
pub fn read(
    path: &Path,
    options: &CsvOptions,
    skipped: &BadRows,
) -> Result<Vec<RecordBatch>, EtlError> {
    let file = path.display().to_string();
    let bytes = read_bytes(path)?;
    let csv_error = |e: csv::Error| EtlError::Csv(file.clone(), e.to_string());
    let mut reader = builder(options)
        .has_headers(options.header)
        .from_reader(&bytes[..]);
    let header: Vec<String> = match options.header {
        true => reader
            .headers()
            .map_err(csv_error)?
            .iter()
            .map(String::from)
            .collect(),
        false => Vec::new(),
    };
    // Rows that do not read (invalid UTF-8) are reported when the body is parsed, not here.
    let sample: Vec<csv::StringRecord> = reader
        .records()
        .filter_map(Result::ok)
        .take(INFER_ROWS)
        .collect();
    let schema =
        schema(options, &header, &sample).map_err(|why| EtlError::Csv(file.clone(), why))?;
    // The body: everything after the header line, which starts on line `first_line`.
    let (body, first_line) = match options.header {
        true => {
            let end = bytes
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| i + 1);
            (&bytes[end..], 2)
        }
        false => (&bytes[..], 1),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunks = match body.len() >= PARALLEL_BYTES && !body.contains(&b'"') {
        true => chunks(body, first_line, threads),
        false => vec![(body, first_line)],
    };
    let (schema, file) = (&schema, &file);
    let parts: Vec<Result<RecordBatch, EtlError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|&(chunk, line)| {
                scope.spawn(move || parse(chunk, line, schema, options, file, skipped))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a CSV parser thread panicked"))
            .collect()
    });
    parts.into_iter().collect()
}

/// The CSV reader settings every chunk shares.
fn builder(options: &CsvOptions) -> csv::ReaderBuilder {
    let mut builder = csv::ReaderBuilder::new();
    builder
        .delimiter(options.delimiter)
        .trim(csv::Trim::All)
        .flexible(true)
        .buffer_capacity(1 << 20);
    builder
}

/// `body` cut at newlines into about `n` chunks, each with the file line it starts on.
fn chunks(body: &[u8], first_line: u64, n: usize) -> Vec<(&[u8], u64)> {
    let mut out = Vec::with_capacity(n);
    let (mut start, mut line) = (0, first_line);
    for k in 1..=n {
        let target = (body.len() * k / n).max(start);
        let end = match k == n {
            true => body.len(),
            false => body[target..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(body.len(), |i| target + i + 1),
        };
        if end > start {
            out.push((&body[start..end], line));
            line += body[start..end].iter().filter(|&&b| b == b'\n').count() as u64;
        }
        start = end;
    }
    out
}

/// Parses the rows of `chunk` (no header; its first row is on file line `first_line`).
fn parse(
    chunk: &[u8],
    first_line: u64,
    schema: &SchemaRef,
    options: &CsvOptions,
    file: &str,
    skipped: &BadRows,
) -> Result<RecordBatch, EtlError> {
    let types: Vec<&DataType> = schema.fields().iter().map(|f| f.data_type()).collect();
    // Rows and text bytes per column, estimated from the chunk's lines and size.
    let rows = chunk.iter().filter(|&&b| b == b'\n').count() + 1;
    let bytes = chunk.len() / types.len().max(1);
    let mut columns: Vec<Column> = types.iter().map(|t| Column::new(t, rows, bytes)).collect();
    let is_null = |v: &str| v.is_empty() || options.nulls.iter().any(|n| n == v);
    let mut reader = builder(options).has_headers(false).from_reader(chunk);
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            // Invalid UTF-8 spoils one row, not the file: report or skip it like any bad row.
            Err(e) => match e.kind() {
                csv::ErrorKind::Utf8 {
                    pos: Some(pos),
                    err,
                } => {
                    let bad = BadRow {
                        file: file.to_string(),
                        line: first_line + pos.line() - 1,
                        reason: format!("invalid UTF-8 in column {}", err.field() + 1),
                    };
                    match handle(options.bad_rows, bad, skipped) {
                        Some(bad) => return Err(EtlError::BadRow(bad)),
                        None => continue,
                    }
                }
                _ => return Err(EtlError::Csv(file.to_string(), e.to_string())),
            },
        }
        let mut row = Vec::with_capacity(types.len());
        match read_row(&record, schema, &is_null, &mut row) {
            Ok(()) => columns.iter_mut().zip(row).for_each(|(c, v)| c.append(v)),
            Err(reason) => {
                let line = first_line + record.position().map_or(0, |p| p.line()) - 1;
                let bad = BadRow {
                    file: file.to_string(),
                    line,
                    reason,
                };
                if let Some(bad) = handle(options.bad_rows, bad, skipped) {
                    return Err(EtlError::BadRow(bad));
                }
            }
        }
    }
    let arrays: Vec<ArrayRef> = columns.into_iter().map(Column::finish).collect();
    Ok(RecordBatch::try_new(schema.clone(), arrays)?)
}

/// One parsed field.
enum Value<'a> {
    Null,
    Int(i64),
    Float(f64),
    Text(&'a str),
}

/// Parses one record against the schema into `row`, or says why it does not fit; nothing is
/// appended to the columns until the whole row parsed, so a bad row leaves no trace.
fn read_row<'a>(
    record: &'a csv::StringRecord,
    schema: &Schema,
    is_null: &dyn Fn(&str) -> bool,
    row: &mut Vec<Value<'a>>,
) -> Result<(), String> {
    if record.len() != schema.fields().len() {
        return Err(format!(
            "expected {} columns, found {}",
            schema.fields().len(),
            record.len()
        ));
    }
    for (i, (field, value)) in schema.fields().iter().zip(record).enumerate() {
        let parsed = match field.data_type() {
            _ if is_null(value) => Some(Value::Null),
            DataType::Int64 => value.parse().ok().map(Value::Int),
            DataType::Float64 => value.parse().ok().map(Value::Float),
            _ => Some(Value::Text(value)),
        };
        let parsed = parsed.ok_or_else(|| {
            format!(
                "column {} ('{}'): cannot read '{value}' as {}",
                i + 1,
                field.name(),
                field.data_type()
            )
        })?;
        row.push(parsed);
    }
    Ok(())
}

/// The given columns, or header names (`c1..cN` without a header) with types inferred from
/// the first rows of the right width. A file with no columns, or a header naming one column
/// twice, is an error.
fn schema(
    options: &CsvOptions,
    header: &[String],
    sample: &[csv::StringRecord],
) -> Result<SchemaRef, String> {
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
    if columns.is_empty() {
        return Err("no columns: the file is empty".into());
    }
    for (i, (name, _)) in columns.iter().enumerate() {
        if let Some(j) = columns[..i].iter().position(|(n, _)| n == name) {
            return Err(format!(
                "column name '{name}' appears twice (columns {} and {}); name the columns \
                 with the columns option",
                j + 1,
                i + 1
            ));
        }
    }
    Ok(Arc::new(Schema::new(
        columns
            .into_iter()
            .map(|(n, t)| Field::new(n, t, true))
            .collect::<Vec<_>>(),
    )))
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
    /// A builder sized for about `rows` rows (and `bytes` of text), so it does not regrow.
    fn new(t: &DataType, rows: usize, bytes: usize) -> Self {
        match t {
            DataType::Int64 => Column::Int(Int64Builder::with_capacity(rows)),
            DataType::Float64 => Column::Float(Float64Builder::with_capacity(rows)),
            _ => Column::Text(StringBuilder::with_capacity(rows, bytes)),
        }
    }

    /// Appends a value parsed for this column's type.
    fn append(&mut self, v: Value<'_>) {
        match (self, v) {
            (Column::Int(b), Value::Int(x)) => b.append_value(x),
            (Column::Float(b), Value::Float(x)) => b.append_value(x),
            (Column::Text(b), Value::Text(x)) => b.append_value(x),
            (Column::Int(b), _) => b.append_null(),
            (Column::Float(b), _) => b.append_null(),
            (Column::Text(b), _) => b.append_null(),
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

    /// Reads and joins the chunks, for checking.
    fn read_one(path: &Path, options: &CsvOptions) -> Result<RecordBatch, EtlError> {
        let parts = read(path, options, &BadRows::default())?;
        Ok(datafusion::arrow::compute::concat_batches(
            &parts[0].schema(),
            &parts,
        )?)
    }

    #[test]
    fn empty_files_and_repeated_header_names_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.csv");
        std::fs::write(&empty, "").unwrap();
        let err = read_one(&empty, &CsvOptions::default()).unwrap_err();
        assert!(err.to_string().contains("empty.csv: no columns"), "{err}");
        let twice = dir.path().join("twice.csv");
        std::fs::write(&twice, "a,b,a\n1,2,3\n").unwrap();
        let err = read_one(&twice, &CsvOptions::default()).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("twice.csv: column name 'a' appears twice (columns 1 and 3)"),
            "{err}"
        );
        let broken = dir.path().join("broken.csv");
        std::fs::write(&broken, b"a,b\n1,x\n2,\xff\n3,z\n").unwrap();
        let err = read_one(&broken, &CsvOptions::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("broken.csv:3: invalid UTF-8 in column 2"),
            "{err}"
        );
        let skip: CsvOptions = "bad_rows=skip".parse().unwrap();
        assert_eq!(read_one(&broken, &skip).unwrap().num_rows(), 2);
    }

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
        let skipped = BadRows::default();
        let err = read(&path, &options, &skipped).unwrap_err().to_string();
        assert!(
            err.contains("people.csv:3: expected 3 columns, found 2"),
            "{err}"
        );
        options.bad_rows = BadRowPolicy::Skip;
        let parts = read(&path, &options, &skipped).unwrap();
        let batch = datafusion::arrow::compute::concat_batches(&parts[0].schema(), &parts).unwrap();
        assert_eq!(batch.num_rows(), 2);
        let report = skipped.take();
        assert_eq!(report.count, 2, "this reader's report alone");
        assert_eq!(report.first[0].line, 3);
        assert_eq!(skipped.take().count, 0, "taken");
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(1), 50);
        assert!(batch.column(1).is_null(1), "'?' reads as null");
        assert_eq!(
            batch.column(1).as_string::<i32>().value(0),
            "State-gov",
            "spaces trimmed"
        );
        let options: CsvOptions = "header=false".parse().unwrap();
        std::fs::write(&path, "1,a\n2,b\n").unwrap();
        let batch = read_one(&path, &options).unwrap();
        assert_eq!(batch.schema().field(0).data_type(), &DataType::Int64);
        assert_eq!(batch.schema().field(1).name(), "c2");
        assert!("columns=x complex".parse::<CsvOptions>().is_err());
    }

    #[test]
    fn chunks_end_at_newlines_and_know_their_first_line() {
        let body = b"a,1\nbb,2\nccc,3\nd,4\n";
        let parts = chunks(body, 2, 3);
        let joined: Vec<u8> = parts.iter().flat_map(|(c, _)| c.iter().copied()).collect();
        assert_eq!(joined, body.to_vec());
        for (chunk, line) in &parts {
            assert!(chunk.ends_with(b"\n"));
            let first = std::str::from_utf8(chunk).unwrap().lines().next().unwrap();
            let expected = ["a,1", "bb,2", "ccc,3", "d,4"]
                .iter()
                .position(|l| *l == first)
                .unwrap() as u64
                + 2;
            assert_eq!(*line, expected, "{first}");
        }
    }

    #[test]
    fn a_large_file_parses_in_parallel_with_exact_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.csv");
        let mut text = String::from("n,s\n");
        let rows = 500_000;
        for i in 0..rows {
            text.push_str(&format!("{i},value_{i}\n"));
        }
        text.push_str("oops,x\n");
        std::fs::write(&path, &text).unwrap();
        assert!(text.len() >= PARALLEL_BYTES);
        let mut options: CsvOptions = "columns=n int, s string".parse().unwrap();
        let err = read(&path, &options, &BadRows::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("big.csv:{}: column 1", rows + 2)),
            "{err}"
        );
        options.bad_rows = BadRowPolicy::Skip;
        let batch = read_one(&path, &options).unwrap();
        assert_eq!(batch.num_rows(), rows);
        let n = batch.column(0).as_primitive::<Int64Type>();
        assert!(
            (0..rows).all(|i| n.value(i) == i as i64),
            "rows keep their order"
        );
    }
}
