//! Table functions that read raw files through `angel-etl`:
//!
//! - `read_csv(path [, options])`: options as `key=value; ...` (`header`, `delimiter`,
//!   `nulls`, `columns`, `bad_rows`), see `angel_etl::csv::CsvOptions`.
//! - `read_libsvm(path [, options])`: `label, idx, val`, indices 0-based; options `format`
//!   (`libsvm` or Angel's `dummy`), `index_base`, `bad_rows`, see
//!   `angel_etl::libsvm::LibsvmOptions`.
//!
//! `path` is a local path or a URL (`file://`, `s3://bucket/key`, `hdfs://namenode/path`; see
//! `angel_storage`) naming a file, a directory of files or a glob, read as one table. The
//! column types are settled when the query is planned; the files stream through their
//! parser each time the table is scanned ([`FileTable`]), on as many partitions as the
//! session plans for, so neither the files nor the table is held whole. On a Ballista
//! cluster the rows are written to the job's [`Stage`] as Parquet for the executors to scan.

use std::collections::HashMap;
use std::sync::Arc;

use angel_etl::bad_rows::BadRows;
use angel_etl::{EtlError, csv, libsvm};
use angel_storage::{Location, list};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::Expr;

use crate::ballista::Stage;
use crate::file_table::{self, FileTable, Read, slices};

/// Which format a [`ReadFile`] reads.
#[derive(Debug, Clone, Copy)]
pub enum Format {
    /// `read_csv`.
    Csv,
    /// `read_libsvm`.
    Libsvm,
}

/// See the module documentation.
#[derive(Debug)]
pub struct ReadFile {
    format: Format,
    stage: Option<Arc<Stage>>,
    /// The job's report of skipped rows.
    skipped: Arc<BadRows>,
}

impl ReadFile {
    /// The table function for `format`, recording skipped rows in `skipped`; with a `stage`,
    /// tables are staged as Parquet.
    pub fn new(format: Format, stage: Option<Arc<Stage>>, skipped: Arc<BadRows>) -> Self {
        ReadFile {
            format,
            stage,
            skipped,
        }
    }

    /// The SQL name.
    pub fn name(&self) -> &'static str {
        match self.format {
            Format::Csv => "read_csv",
            Format::Libsvm => "read_libsvm",
        }
    }
}

fn string_arg(function: &str, args: &[Expr], i: usize) -> Result<Option<String>> {
    match args.get(i) {
        None => Ok(None),
        Some(Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        )) => Ok(Some(s.clone())),
        Some(other) => plan_err!(
            "{function}: argument {} must be a string literal, got {other}",
            i + 1
        ),
    }
}

impl TableFunctionImpl for ReadFile {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let name = self.name();
        let exprs = args.exprs();
        let Some(path) = string_arg(name, exprs, 0)? else {
            return plan_err!("{name}: the first argument is the file path");
        };
        let option = string_arg(name, exprs, 1)?.unwrap_or_default();
        let etl = |e: EtlError| DataFusionError::Plan(format!("{name}: {e}"));
        let location = Location::parse(&path).map_err(|e| etl(e.into()))?;
        let listed = list::stamped(&location).map_err(|e| etl(e.into()))?;
        // On a cluster, the stamps tell a file staged before from a changed one.
        let stamps: Vec<String> = (listed.iter())
            .map(|(file, stamp)| format!("{file} {stamp}"))
            .collect();
        let files: Vec<Location> = listed.into_iter().map(|(file, _)| file).collect();
        let skipped = self.skipped.clone();
        let (schema, read): (SchemaRef, Read) = match self.format {
            Format::Csv => {
                let options: csv::CsvOptions = option.parse().map_err(etl)?;
                let schema = csv::schema(&files, &options).map_err(etl)?;
                let columns = schema.clone();
                let read = move |send: &mut dyn FnMut(RecordBatch) -> bool| {
                    csv::stream(&files, &options, &columns, &skipped, send)
                };
                (schema, Arc::new(read))
            }
            Format::Libsvm => {
                let options: libsvm::LibsvmOptions = option.parse().map_err(etl)?;
                let read = move |send: &mut dyn FnMut(RecordBatch) -> bool| {
                    for batch in libsvm::read(&files, options, &skipped)? {
                        if !send(batch) {
                            break;
                        }
                    }
                    Ok(())
                };
                (libsvm::schema(), Arc::new(read))
            }
        };
        let source = format!("{name}('{path}', '{option}')");
        let schema = tagged_schema(&schema, &source);
        let partitions = args.session().config().target_partitions();
        let Some(stage) = &self.stage else {
            let table = FileTable::new(schema, read, partitions, source);
            return Ok(Arc::new(table));
        };
        let read_from = format!("{source} in {partitions} partitions: {}", stamps.join(", "));
        stage.write_once(&read_from, name, || {
            let mut batches = file_table::collect(&read).map_err(etl)?;
            if batches.is_empty() {
                batches.push(RecordBatch::new_empty(schema.clone()));
            }
            Ok(split(&tagged(batches, &source)?, partitions))
        })
    }
}

/// `schema` with `source` in its metadata (see [`tagged`]).
pub fn tagged_schema(schema: &Schema, source: &str) -> SchemaRef {
    let metadata = HashMap::from([(SOURCE_KEY.to_string(), source.to_string())]);
    Arc::new(schema.clone().with_metadata(metadata))
}

/// The schema metadata key naming the call a table came from.
pub const SOURCE_KEY: &str = "angel.source";

/// `batches` with `source` in their schema's metadata. DataFusion names every table-function
/// scan after the function alone and compares scans by name and schema, so without this two
/// calls reading different files in one query (`(SELECT count(*) FROM read_csv('a.csv')),
/// (SELECT count(*) FROM read_csv('b.csv'))`) would be merged as one common subexpression.
pub fn tagged(batches: Vec<RecordBatch>, source: &str) -> Result<Vec<RecordBatch>> {
    let Some(first) = batches.first() else {
        return Ok(batches);
    };
    let schema = tagged_schema(&first.schema(), source);
    Ok(batches
        .into_iter()
        .map(|b| b.with_schema(schema.clone()))
        .collect::<Result<_, _>>()?)
}

/// `batches` cut into `parts` partitions of nearly equal rows: partition p holds the p-th
/// slice of every batch (slices share the batches' memory).
fn split(batches: &[RecordBatch], parts: usize) -> Vec<Vec<RecordBatch>> {
    let mut out = vec![Vec::new(); parts.max(1)];
    for batch in batches {
        for (part, slice) in out.iter_mut().zip(slices(batch, parts)) {
            part.push(slice);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{AsArray, RecordBatch};
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::prelude::SessionContext;

    use super::*;

    #[tokio::test]
    async fn two_calls_on_different_files_in_one_query_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
        std::fs::write(&a, "x\n1\n").unwrap();
        std::fs::write(&b, "x\n1\n2\n3\n").unwrap();
        let ctx = SessionContext::new();
        let function = ReadFile::new(Format::Csv, None, Arc::default());
        ctx.register_udtf(function.name(), Arc::new(function));
        let sql = format!(
            "SELECT (SELECT count(*) FROM read_csv('{}')) AS a, \
             (SELECT count(*) FROM read_csv('{}')) AS b",
            a.display(),
            b.display()
        );
        let out: Vec<RecordBatch> = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let count = |c: usize| out[0].column(c).as_primitive::<Int64Type>().value(0);
        assert_eq!((count(0), count(1)), (1, 3));
    }
}
