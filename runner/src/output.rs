//! `--output json`: what `run` and `demo` print, for scripts and tests, as JSON lines (one
//! object per line on standard output, each with a `kind`):
//!
//! - `result`: a statement's result: `line`, `statement`, `seconds`, `rows` (every row, as an
//!   object of column name to value; NaN and infinities as null).
//! - `epoch`: one row of `CREATE MODEL`'s epoch table: `line`, `statement`, then the table's
//!   columns (`epoch`, `rows`, `train_loss`, `holdout_loss`, `holdout_auc`, `seconds`, ...).
//! - `summary`: after the job: `statements` (`line`, `statement`, `seconds` each),
//!   `total_seconds`, `replayed` and `lost` (changes resent to restored partitions, and those
//!   that could not be), `skipped` (`line`, `count`, `first` bad input rows per statement).
//! - `holdout` (`demo` only): `auc`, `log_loss`.
//!
//! The field names are stable; docs/operations.md lists them.

use std::error::Error;
use std::time::Duration;

use angel_sql::job::StatementReport;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::json::WriterBuilder;
use datafusion::arrow::json::writer::JsonArray;
use serde_json::{Map, Value, json};

/// How a command prints its results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "flags", derive(clap::ValueEnum))]
pub enum Output {
    /// Tables for people.
    #[default]
    Text,
    /// JSON lines for programs.
    Json,
}

/// The rows of `batches` as JSON objects of column name to value.
pub fn rows(batches: &[RecordBatch]) -> Result<Vec<Map<String, Value>>, Box<dyn Error>> {
    let mut writer = WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, JsonArray>(Vec::new());
    writer.write_batches(&batches.iter().collect::<Vec<_>>())?;
    writer.finish()?;
    let bytes = writer.into_inner();
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    Ok(serde_json::from_slice(&bytes)?)
}

/// The JSON lines of one statement: its epoch rows if it trained a model, else its result if
/// it has rows; nothing otherwise.
pub fn report_lines(report: &StatementReport) -> Result<Vec<Value>, Box<dyn Error>> {
    let head = |kind: &str| {
        let mut object = Map::new();
        object.insert("kind".into(), json!(kind));
        object.insert("line".into(), json!(report.line));
        object.insert("statement".into(), json!(report.label));
        object
    };
    if let Some(table) = report.epoch_table() {
        return Ok(rows(std::slice::from_ref(table))?
            .into_iter()
            .map(|row| {
                let mut object = head("epoch");
                object.extend(row);
                Value::Object(object)
            })
            .collect());
    }
    let rows = rows(&report.output)?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut object = head("result");
    object.insert("seconds".into(), json!(report.took.as_secs_f64()));
    object.insert("rows".into(), json!(rows));
    Ok(vec![Value::Object(object)])
}

/// The summary line of a finished job.
pub fn summary_line(reports: &[StatementReport]) -> Value {
    let statements: Vec<Value> = reports
        .iter()
        .map(|r| json!({"line": r.line, "statement": r.label, "seconds": r.took.as_secs_f64()}))
        .collect();
    let skipped: Vec<Value> = reports
        .iter()
        .filter(|r| r.skipped.count > 0)
        .map(|r| {
            let first: Vec<String> = r.skipped.first.iter().map(ToString::to_string).collect();
            json!({"line": r.line, "count": r.skipped.count, "first": first})
        })
        .collect();
    let total: Duration = reports.iter().map(|r| r.took).sum();
    json!({
        "kind": "summary",
        "statements": statements,
        "total_seconds": total.as_secs_f64(),
        "replayed": reports.iter().map(|r| r.replayed.0).sum::<u64>(),
        "lost": reports.iter().map(|r| r.replayed.1).sum::<u64>(),
        "skipped": skipped,
    })
}

/// A table as a JSON line: `{"kind": "table", "table": name, "rows": [...]}`, each row an
/// object of column header to cell; a cell that reads as an integer or a finite number
/// becomes a number.
pub fn table_line(name: &str, header: &[String], rows: &[Vec<String>]) -> Value {
    let cell = |text: &String| match (text.parse::<i64>(), text.parse::<f64>()) {
        (Ok(n), _) => json!(n),
        (_, Ok(x)) if x.is_finite() => json!(x),
        _ => json!(text),
    };
    let rows: Vec<Value> = rows
        .iter()
        .map(|row| {
            let object: Map<String, Value> = header
                .iter()
                .zip(row)
                .map(|(h, c)| (h.clone(), cell(c)))
                .collect();
            Value::Object(object)
        })
        .collect();
    json!({"kind": "table", "table": name, "rows": rows})
}

/// Prints one JSON line.
pub fn print(line: &Value) {
    println!("{line}");
}

/// Prints a statement's lines; a result that cannot be converted is printed as an error line
/// rather than lost silently.
pub fn print_report(report: &StatementReport) {
    match report_lines(report) {
        Ok(lines) => lines.iter().for_each(print),
        Err(e) => print(&json!({
            "kind": "error",
            "line": report.line,
            "statement": report.label,
            "message": format!("cannot convert the result to JSON: {e}"),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    #[test]
    fn rows_become_objects_with_nan_as_null() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("auc", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![Some("a"), None])),
                Arc::new(Float64Array::from(vec![0.75, f64::NAN])),
            ],
        )
        .unwrap();
        let rows = rows(&[batch.clone(), batch]).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0]["name"], json!("a"));
        assert_eq!(rows[0]["auc"], json!(0.75));
        assert_eq!(rows[1]["name"], Value::Null);
        assert_eq!(rows[1]["auc"], Value::Null, "NaN is not JSON");
        assert!(super::rows(&[]).unwrap().is_empty());
    }

    #[test]
    fn table_cells_that_read_as_numbers_become_numbers() {
        let header = ["phase".to_string(), "s".to_string(), "rows".to_string()];
        let line = table_line(
            "t",
            &header,
            &[vec!["read".into(), "1.50".into(), "20000".into()]],
        );
        assert_eq!(line["kind"], "table");
        assert_eq!(line["table"], "t");
        let row = &line["rows"][0];
        assert_eq!(
            (row["phase"].as_str(), row["s"].as_f64()),
            (Some("read"), Some(1.5))
        );
        assert_eq!(row["rows"].as_i64(), Some(20000));
        let dash = table_line("t", &header, &[vec!["x".into(), "-".into(), "NaN".into()]]);
        assert_eq!(
            (
                dash["rows"][0]["s"].as_str(),
                dash["rows"][0]["rows"].as_str()
            ),
            (Some("-"), Some("NaN"))
        );
    }
}
