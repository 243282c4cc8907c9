//! Table functions that read raw files through `angel-etl`:
//!
//! - `read_csv(path [, options])`: options as `key=value; ...` (`header`, `delimiter`,
//!   `nulls`, `columns`, `bad_rows`), see `angel_etl::csv::CsvOptions`.
//! - `read_libsvm(path [, options])`: `label, idx, val`, indices 0-based; options as
//!   `read_csv`'s (`bad_rows`), see `angel_etl::libsvm::LibsvmOptions`.
//!
//! The file is read once, when the query is planned, and split into as many partitions as
//! the session plans for, so the training that follows runs in parallel. On a Ballista cluster
//! the partitions are written to the job's [`Stage`] as Parquet for the executors to scan.

use std::path::Path;
use std::sync::Arc;

use angel_etl::bad_rows::BadRows;
use angel_etl::{EtlError, csv, libsvm};
use datafusion::arrow::array::RecordBatch;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::Expr;

use crate::cluster::Stage;

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
        let batches = match self.format {
            Format::Csv => csv::read(
                Path::new(&path),
                &option.parse().map_err(etl)?,
                &self.skipped,
            ),
            Format::Libsvm => libsvm::read(
                Path::new(&path),
                option.parse().map_err(etl)?,
                &self.skipped,
            )
            .map(|b| vec![b]),
        }
        .map_err(etl)?;
        let parts = split(&batches, args.session().config().target_partitions());
        match &self.stage {
            Some(stage) => stage.write(name, &parts),
            None => Ok(Arc::new(MemTable::try_new(batches[0].schema(), parts)?)),
        }
    }
}

/// `batches` cut into `parts` partitions of nearly equal rows: partition p holds the p-th
/// slice of every batch (slices share the batches' memory).
fn split(batches: &[RecordBatch], parts: usize) -> Vec<Vec<RecordBatch>> {
    let parts = parts.max(1);
    let mut out = vec![Vec::new(); parts];
    for batch in batches {
        let size = batch.num_rows().div_ceil(parts);
        for (p, part) in out.iter_mut().enumerate() {
            let start = (p * size).min(batch.num_rows());
            part.push(batch.slice(start, size.min(batch.num_rows() - start)));
        }
    }
    out
}
