//! CSV into Arrow, for raw data as it comes: with or without a header, any one-byte
//! delimiter, null tokens such as `?`, spaces around values, and typed columns whose bad
//! values are reported by file, line and column.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::buffer::{NullBuffer, OffsetBuffer};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use angel_storage::read::open;
use angel_storage::{Location, StorageError};

use crate::EtlError;
use crate::bad_rows::{BadRow, BadRowPolicy, BadRows, handle};
use crate::source::Blocks;

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
    /// columns=age int, name string; bad_rows=skip`. `\;` is a `;` inside a value
    /// (`delimiter=\;`), `\t` a tab; an option given twice is an error.
    fn from_str(s: &str) -> Result<Self, EtlError> {
        let mut o = CsvOptions::default();
        let mut seen = Vec::new();
        for pair in split_options(s) {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let bad = |why: String| EtlError::Options(format!("CSV option '{pair}': {why}"));
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad("expected key=value".into()))?;
            let (key, value) = (key.trim(), value.trim());
            if seen.contains(&key) {
                return Err(bad(format!("'{key}' is given twice")));
            }
            seen.push(key);
            match key {
                "header" => {
                    o.header = value
                        .parse()
                        .map_err(|_| bad("expected true or false".into()))?
                }
                "delimiter" => {
                    let value = match value {
                        "\\t" => "\t",
                        "\\;" => ";",
                        value => value,
                    };
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

/// `s` cut at each `;` that no backslash escapes (the escape stays for the value to read).
fn split_options(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            ';' if !escaped => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        escaped = c == '\\' && !escaped;
    }
    parts.push(&s[start..]);
    parts
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

/// Bytes of a block parsed as one unit; blocks of a file parse on every core.
const BLOCK_BYTES: usize = 8 << 20;

/// Reads CSV files (one schema, taken from the first) into record batches, one per block in
/// file order; see [`stream`].
pub fn read(
    files: &[Location],
    options: &CsvOptions,
    skipped: &BadRows,
) -> Result<Vec<RecordBatch>, EtlError> {
    let schema = schema(files, options)?;
    let mut out = Vec::new();
    stream(files, options, &schema, skipped, &mut |batch| {
        out.push(batch);
        true
    })?;
    match out.is_empty() {
        true => Ok(vec![RecordBatch::new_empty(schema)]),
        false => Ok(out),
    }
}

/// The schema of the table `files` make: the columns of `options`, or the first non-empty
/// file's header (or `c1, c2, ...`) with types inferred from its first rows.
pub fn schema(files: &[Location], options: &CsvOptions) -> Result<SchemaRef, EtlError> {
    for location in files {
        let mut blocks = Blocks::new(open(location)?, BLOCK_BYTES, options.delimiter);
        let first = blocks
            .next_block()
            .map_err(|e| StorageError::io(location, e))?;
        let Some((first, _)) = first else { continue };
        let csv_error = |why| EtlError::Csv(location.to_string(), why);
        let (header, body_start) = header(&first, options).map_err(csv_error)?;
        let sample = sample(&first[body_start..], options);
        return infer_schema(options, &header, &sample).map_err(csv_error);
    }
    let file = files.first().map_or(String::new(), |f| f.to_string());
    Err(EtlError::Csv(file, "no columns: the file is empty".into()))
}

/// Reads CSV files with `schema` (from [`schema`]) and hands each block's rows to `send`, in
/// file order, as they are parsed. Each file streams from its store in blocks of whole rows
/// that parse on every core, so neither a file nor the table is held whole. Each row is
/// checked against the schema before anything is appended, so a skipped row leaves no trace.
/// Stops early when `send` returns false; a failure is the first in file order.
pub fn stream(
    files: &[Location],
    options: &CsvOptions,
    schema: &SchemaRef,
    skipped: &BadRows,
    send: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<(), EtlError> {
    for location in files {
        if !read_file(location, options, schema, skipped, send)? {
            break;
        }
    }
    Ok(())
}

/// Reads one file, which must have the columns of `schema`; false when `send` stopped.
fn read_file(
    location: &Location,
    options: &CsvOptions,
    schema: &SchemaRef,
    skipped: &BadRows,
    send: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<bool, EtlError> {
    let file = location.to_string();
    let mut blocks = Blocks::new(open(location)?, BLOCK_BYTES, options.delimiter);
    let first = blocks
        .next_block()
        .map_err(|e| StorageError::io(location, e))?;
    // An empty part beside others adds no rows.
    let Some((mut first, _)) = first else {
        return Ok(true);
    };
    let (header, body_start) =
        header(&first, options).map_err(|e| EtlError::Csv(file.clone(), e))?;
    if options.columns.is_empty() {
        check_header(schema, &header).map_err(|e| EtlError::Csv(file.clone(), e))?;
    }
    let body_line = 1 + first[..body_start].iter().filter(|&&b| b == b'\n').count() as u64;
    first.drain(..body_start);
    let file = Parse {
        schema,
        options,
        file: &file,
        skipped,
    };
    parse_blocks(&mut blocks, (first, body_line), &file, location, send)
}

/// The header's names (none without a header) and where the body starts in `block`.
fn header(block: &[u8], options: &CsvOptions) -> Result<(Vec<String>, usize), String> {
    if !options.header {
        return Ok((Vec::new(), 0));
    }
    let mut reader = builder(options).has_headers(true).from_reader(block);
    let names = reader
        .headers()
        .map_err(|e| e.to_string())?
        .iter()
        .map(|name| name.trim().to_string())
        .collect();
    Ok((names, reader.position().byte() as usize))
}

/// A file after the first must name the first file's columns, in order.
fn check_header(schema: &Schema, header: &[String]) -> Result<(), String> {
    let expected: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
    match header.is_empty() || header.iter().eq(expected.iter().copied()) {
        true => Ok(()),
        false => Err(format!(
            "the header ({}) differs from the first file's ({}); files read as one table \
             need the same columns",
            header.join(", "),
            expected
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The first rows of `body`, to infer types from. Rows that do not read (invalid UTF-8) are
/// reported when the body is parsed, not here.
fn sample(body: &[u8], options: &CsvOptions) -> Vec<csv::StringRecord> {
    builder(options)
        .has_headers(false)
        .from_reader(body)
        .records()
        .filter_map(Result::ok)
        .take(INFER_ROWS)
        .map(|mut record| {
            record.trim();
            record
        })
        .collect()
}

/// What parsing a block of one file needs.
struct Parse<'a> {
    schema: &'a SchemaRef,
    options: &'a CsvOptions,
    file: &'a str,
    skipped: &'a BadRows,
}

/// Blocks parsed out of order, waiting to be handed on in file order.
type Parsed = Mutex<BTreeMap<usize, Result<RecordBatch, EtlError>>>;

/// Parses `first` and every further block on all cores and hands the batches to `send` in
/// file order as they are ready; reading waits while `send` does, so at most a few blocks
/// are in memory. The first failure in file order is the one reported, and stops reading;
/// false when `send` stopped.
fn parse_blocks<R: std::io::Read>(
    blocks: &mut Blocks<R>,
    first: (Vec<u8>, u64),
    file: &Parse,
    location: &Location,
    send: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<bool, EtlError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let failed = AtomicBool::new(false);
    let parsed = Parsed::default();
    let mut handed = 0;
    let (queue, receive) = sync_channel::<(usize, Vec<u8>, u64)>(threads);
    let receive = Mutex::new(receive);
    let stopped = std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let next = receive.lock().expect("block queue").recv();
                    let Ok((n, block, line)) = next else { return };
                    let batch = file.parse(&block, line);
                    failed.fetch_or(batch.is_err(), Ordering::Relaxed);
                    parsed.lock().expect("parsed blocks").insert(n, batch);
                }
            });
        }
        let mut next = Some(first);
        let mut n = 0;
        while let Some((block, line)) = next.take() {
            if failed.load(Ordering::Relaxed) || queue.send((n, block, line)).is_err() {
                break;
            }
            n += 1;
            let handing = hand_on(&parsed, &mut handed, send);
            if !matches!(handing, Ok(true)) {
                failed.store(true, Ordering::Relaxed);
                return Ok(Some(handing));
            }
            next = blocks.next_block()?;
        }
        drop(queue);
        Ok::<_, std::io::Error>(None)
    });
    // A read failure comes after the blocks before it, and after their own failures.
    let read_error = match stopped {
        Ok(Some(handing)) => return handing,
        Ok(None) => None,
        Err(e) => Some(e),
    };
    let handing = hand_on(&parsed, &mut handed, send)?;
    match read_error {
        Some(e) if handing => Err(StorageError::io(location, e).into()),
        _ => Ok(handing),
    }
}

/// Hands the parsed blocks from number `handed` on to `send` until one is not parsed yet;
/// false when `send` stopped, and a block's failure when it is next.
fn hand_on(
    parsed: &Parsed,
    handed: &mut usize,
    send: &mut dyn FnMut(RecordBatch) -> bool,
) -> Result<bool, EtlError> {
    loop {
        let next = parsed.lock().expect("parsed blocks").remove(handed);
        match next {
            None => return Ok(true),
            Some(batch) => {
                *handed += 1;
                if !send(batch?) {
                    return Ok(false);
                }
            }
        }
    }
}

/// The CSV reader settings every block shares. Fields are trimmed where they are read (the
/// header and the type sample here, the body in [`parse`]), not by the reader, which would
/// rewrite every record.
fn builder(options: &CsvOptions) -> csv::ReaderBuilder {
    let mut builder = csv::ReaderBuilder::new();
    builder
        .delimiter(options.delimiter)
        .flexible(true)
        .buffer_capacity(1 << 20);
    builder
}

impl Parse<'_> {
    /// Parses the rows of `chunk` (no header; its first row is on file line `first_line`).
    fn parse(&self, chunk: &[u8], first_line: u64) -> Result<RecordBatch, EtlError> {
        let Parse {
            schema,
            options,
            file,
            skipped,
        } = *self;
        // Rows and text bytes per column, estimated from the chunk's lines and size.
        let rows = chunk.iter().filter(|&&b| b == b'\n').count() + 1;
        let bytes = chunk.len() / schema.fields().len().max(1);
        let mut columns: Vec<Column> = (schema.fields().iter())
            .map(|f| Column::new(f.data_type(), rows, bytes))
            .collect();
        let nulls: Vec<&[u8]> = options.nulls.iter().map(|n| n.as_bytes()).collect();
        let mut reader = builder(options).has_headers(false).from_reader(chunk);
        let mut record = csv::ByteRecord::new();
        let mut done = 0;
        while reader
            .read_byte_record(&mut record)
            .map_err(|e| EtlError::Csv(file.to_string(), e.to_string()))?
        {
            let Err(reason) = read_row(&record, schema, &nulls, &mut columns) else {
                done += 1;
                continue;
            };
            // Nothing of a bad row stays behind.
            columns.iter_mut().for_each(|c| c.truncate(done));
            let bad = BadRow {
                file: file.to_string(),
                line: first_line + record.position().map_or(0, |p| p.line()) - 1,
                reason,
            };
            if let Some(bad) = handle(options.bad_rows, bad, skipped) {
                return Err(EtlError::BadRow(bad));
            }
        }
        let arrays = columns
            .into_iter()
            .map(Column::finish)
            .collect::<Result<_, _>>()?;
        Ok(RecordBatch::try_new(schema.clone(), arrays)?)
    }
}

/// Appends one record's fields to `columns`, or says why the record does not fit the
/// schema (the caller then truncates the columns back to the row before).
fn read_row(
    record: &csv::ByteRecord,
    schema: &Schema,
    nulls: &[&[u8]],
    columns: &mut [Column],
) -> Result<(), String> {
    if record.len() != columns.len() {
        return Err(format!(
            "expected {} columns, found {}",
            columns.len(),
            record.len()
        ));
    }
    for (i, (column, raw)) in columns.iter_mut().zip(record).enumerate() {
        let value = raw.trim_ascii();
        if value.is_empty() || nulls.contains(&value) {
            column.push_null();
            continue;
        }
        if let Err(what) = column.push(value) {
            let field = schema.field(i);
            return Err(match what {
                Unreadable::Utf8 => format!("invalid UTF-8 in column {}", i + 1),
                Unreadable::TooLong => format!(
                    "column {} ('{}'): more than 2 GiB of text in one block of the file",
                    i + 1,
                    field.name()
                ),
                Unreadable::Number => format!(
                    "column {} ('{}'): cannot read '{}' as {}",
                    i + 1,
                    field.name(),
                    String::from_utf8_lossy(value),
                    field.data_type()
                ),
            });
        }
    }
    Ok(())
}

/// The given columns, or header names (`c1..cN` without a header) with types inferred from
/// the first rows of the right width. A file with no columns, or a header naming one column
/// twice, is an error.
fn infer_schema(
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

/// Why a field could not be appended.
enum Unreadable {
    Utf8,
    Number,
    /// A text column's bytes in one block passed the 32-bit offsets of a string array.
    TooLong,
}

/// A column being built, in plain vectors so that a bad row can be cut off again.
struct Column {
    valid: Vec<bool>,
    values: Values,
}

/// A [`Column`]'s values (a placeholder where the row is null).
enum Values {
    Int(Vec<i64>),
    Float(Vec<f64>),
    /// Text bytes, and where each value ends in them.
    Text(Vec<u8>, Vec<i32>),
}

impl Column {
    /// A column sized for about `rows` rows (and `bytes` of text), so it does not regrow.
    fn new(t: &DataType, rows: usize, bytes: usize) -> Self {
        let values = match t {
            DataType::Int64 => Values::Int(Vec::with_capacity(rows)),
            DataType::Float64 => Values::Float(Vec::with_capacity(rows)),
            _ => Values::Text(Vec::with_capacity(bytes), Vec::with_capacity(rows)),
        };
        Column {
            valid: Vec::with_capacity(rows),
            values,
        }
    }

    /// Appends a trimmed, non-null field.
    fn push(&mut self, value: &[u8]) -> Result<(), Unreadable> {
        match &mut self.values {
            Values::Int(values) => values.push(parse_int(value).ok_or(Unreadable::Number)?),
            Values::Float(values) => {
                let text = std::str::from_utf8(value).map_err(|_| Unreadable::Number)?;
                values.push(text.parse().map_err(|_| Unreadable::Number)?);
            }
            Values::Text(bytes, ends) => {
                std::str::from_utf8(value).map_err(|_| Unreadable::Utf8)?;
                bytes.extend_from_slice(value);
                ends.push(i32::try_from(bytes.len()).map_err(|_| Unreadable::TooLong)?);
            }
        }
        self.valid.push(true);
        Ok(())
    }

    fn push_null(&mut self) {
        match &mut self.values {
            Values::Int(values) => values.push(0),
            Values::Float(values) => values.push(0.0),
            Values::Text(bytes, ends) => ends.push(bytes.len() as i32),
        }
        self.valid.push(false);
    }

    /// Cuts the column back to its first `rows` rows.
    fn truncate(&mut self, rows: usize) {
        self.valid.truncate(rows);
        match &mut self.values {
            Values::Int(values) => values.truncate(rows),
            Values::Float(values) => values.truncate(rows),
            Values::Text(bytes, ends) => {
                ends.truncate(rows);
                bytes.truncate(ends.last().map_or(0, |&e| e as usize));
            }
        }
    }

    /// The column as an Arrow array. Text bytes are copied into a buffer of their exact size
    /// when the estimate left spare room: a table keeps its arrays for the whole job, and the
    /// allocator would keep a grown buffer's whole block (shrinking in place frees nothing).
    fn finish(self) -> Result<ArrayRef, EtlError> {
        let nulls = Some(NullBuffer::from(self.valid)).filter(|n| n.null_count() > 0);
        Ok(match self.values {
            Values::Int(values) => Arc::new(Int64Array::new(values.into(), nulls)),
            Values::Float(values) => Arc::new(Float64Array::new(values.into(), nulls)),
            Values::Text(bytes, ends) => {
                let offsets = OffsetBuffer::new(std::iter::once(0).chain(ends).collect());
                let bytes = match bytes.capacity() > bytes.len() + bytes.len() / 8 {
                    true => bytes.as_slice().to_vec(),
                    false => bytes,
                };
                Arc::new(StringArray::try_new(offsets, bytes.into(), nulls)?)
            }
        })
    }
}

/// A decimal integer (an optional sign, then digits), as `str::parse::<i64>` reads it but
/// without going through `str`: most fields of numeric columns are short.
fn parse_int(value: &[u8]) -> Option<i64> {
    let (negative, digits) = match value {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, value),
    };
    if digits.is_empty() || digits.len() > 19 {
        return std::str::from_utf8(value).ok()?.parse().ok();
    }
    let mut magnitude: u64 = 0;
    for &d in digits {
        let d = d.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        magnitude = magnitude * 10 + u64::from(d);
    }
    match negative {
        true => 0i64.checked_sub_unsigned(magnitude),
        false => i64::try_from(magnitude).ok(),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    use super::*;

    /// The location of a test file, as the one file to read.
    fn at(path: &std::path::Path) -> [Location; 1] {
        [Location::parse(path.to_str().expect("UTF-8 temp path")).expect("a local path")]
    }

    /// Reads one file and joins its blocks, for checking.
    fn read_one(path: &std::path::Path, options: &CsvOptions) -> Result<RecordBatch, EtlError> {
        let parts = read(&at(path), options, &BadRows::default())?;
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
        let err = read(&at(&path), &options, &skipped)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("people.csv:3: expected 3 columns, found 2"),
            "{err}"
        );
        options.bad_rows = BadRowPolicy::Skip;
        let parts = read(&at(&path), &options, &skipped).unwrap();
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
    fn an_escaped_semicolon_is_a_delimiter_and_a_repeated_option_is_refused() {
        let o: CsvOptions = r"header=false; delimiter=\;; nulls=?".parse().unwrap();
        assert_eq!((o.delimiter, o.header), (b';', false));
        assert_eq!(o.nulls, ["?"]);
        let tab: CsvOptions = r"delimiter=\t".parse().unwrap();
        assert_eq!(tab.delimiter, b'\t');
        let err = "header=true; header=false"
            .parse::<CsvOptions>()
            .unwrap_err();
        assert!(err.to_string().contains("'header' is given twice"), "{err}");
    }

    #[test]
    fn files_read_as_one_table_need_the_same_header() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            at(&path)[0].clone()
        };
        let a = write("a.csv", "x,y\n1,\"multi\nline\"\n");
        let b = write("b.csv", "x,y\n2,two\n3,three\n");
        let c = write("c.csv", "x,z\n4,four\n");
        let parts = read(&[a.clone(), b], &CsvOptions::default(), &BadRows::default()).unwrap();
        let rows: usize = parts.iter().map(|p| p.num_rows()).sum();
        assert_eq!(rows, 3);
        assert_eq!(
            parts[0].column(1).as_string::<i32>().value(0),
            "multi\nline"
        );
        let err = read(&[a, c], &CsvOptions::default(), &BadRows::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("c.csv: the header (x, z) differs"), "{err}");
    }

    #[test]
    fn integers_read_as_str_parse_reads_them() {
        for text in [
            "0",
            "-0",
            "+7",
            "-42",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "-9223372036854775809",
            "12345678901234567890",
            "1a",
            "-",
            "",
            "+",
            "007",
            "٣",
        ] {
            assert_eq!(
                parse_int(text.as_bytes()),
                text.parse::<i64>().ok(),
                "{text}"
            );
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
        assert!(text.len() >= BLOCK_BYTES, "more than one block");
        let mut options: CsvOptions = "columns=n int, s string".parse().unwrap();
        let err = read(&at(&path), &options, &BadRows::default())
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
        // A reader that stops after the first batch gets that batch, from line 2 on, and no
        // more, even though the file's last row is bad.
        options.bad_rows = BadRowPolicy::Fail;
        let schema = schema(&at(&path), &options).unwrap();
        let mut handed = Vec::new();
        stream(
            &at(&path),
            &options,
            &schema,
            &BadRows::default(),
            &mut |b| {
                handed.push(b);
                false
            },
        )
        .unwrap();
        assert_eq!(handed.len(), 1);
        let first = handed[0].column(0).as_primitive::<Int64Type>();
        assert!(first.len() < rows && first.value(0) == 0, "{}", first.len());
    }
}
