//! [`Rows`]: a statement's training rows, read once and checked, and [`TrainRows`], where every
//! epoch's pass of `ps_train` reads them from: held in memory in contiguous runs (embedded) or
//! the query itself (on Ballista, tables on disk), split by id where workers must keep their
//! rows from round to round; [`RowReading`]: how the job reads them; the query's columns as
//! a driver's queries name them.

use std::sync::Arc;

use angel_training::driver::engine::TrainingQuery;
use angel_training::kinds::Inputs;
use angel_training::{ModelKind, Plan};
use datafusion::arrow::array::{Array, AsArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, take_record_batch};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::catalog::MemTable;
use datafusion::common::{Result, plan_err};
use datafusion::datasource::provider_as_source;
use datafusion::execution::FunctionRegistry;
use datafusion::functions::core::expr_fn::{get_field, named_struct};
use datafusion::functions_aggregate::count::count_all;
use datafusion::functions_aggregate::expr_fn::array_agg;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, lit};
use datafusion::prelude::{DataFrame, SessionContext, col};

use super::plan::check_holdout;

/// How a job reads a statement's training rows.
#[derive(Debug, Clone, Copy)]
pub struct RowReading<'a> {
    /// Every epoch runs the training query again instead of holding its rows in memory (on
    /// Ballista, and when the job keeps tables on disk).
    pub stream_rows: bool,
    /// The Ballista scheduler (`df://host:port`), whose live task slots bound how many
    /// workers can train at once.
    pub scheduler: Option<&'a str>,
}

/// The training rows of a statement, read and checked.
pub(super) struct Rows {
    /// Where every epoch reads them from.
    pub(super) rows: TrainRows,
    /// The query, its columns and how many rows it returns, as the kind's driver sees them.
    pub(super) query: TrainingQuery,
}

impl Rows {
    /// The rows of `query` for `plan`'s workers, after checking its holdout table.
    pub(super) async fn read(
        ctx: &SessionContext,
        plan: &Plan,
        query: &str,
        reading: RowReading<'_>,
    ) -> Result<Self> {
        if let Some(holdout) = &plan.holdout {
            check_holdout(ctx, holdout).await?;
        }
        let (label, inputs) = columns(ctx, query, &*plan.spec.kind).await?;
        let workers = plan.workers();
        if let (true, Some(url)) = (plan.spec.sync.rotation, reading.scheduler) {
            check_slots(url, workers).await?;
        }
        // Model rotation: each worker holds its users' rows, so a user's rows go to one. Rows
        // read anew every round, of a kind whose workers read back what they left by their
        // rows (the topic model's token topics): each round's worker gets the rows of the one
        // before.
        let by_rows = reading.stream_rows && plan.spec.kind.keeps_rows_by_id();
        let by_id = (plan.spec.sync.rotation || by_rows).then_some(0);
        let (rows, count) =
            TrainRows::new(ctx, query, (workers, by_id), reading.stream_rows).await?;
        let in_memory = matches!(rows, TrainRows::Spread(_));
        Ok(Rows {
            rows,
            query: TrainingQuery {
                sql: query.to_string(),
                rows: count,
                label,
                inputs,
                in_memory,
            },
        })
    }
}

/// Fails unless the cluster at `url` can run `workers` tasks at once, as model rotation's
/// workers must (the master would otherwise fail the round only after its workers waited).
async fn check_slots(url: &str, workers: usize) -> Result<()> {
    let (executors, slots) = crate::ballista::live_slots(url).await?;
    match slots as usize >= workers {
        true => Ok(()),
        false => plan_err!(
            "parallelism = 'rotation' needs its {workers} workers to train at once, and the \
             cluster at {url} has {slots} live task slots ({executors} executors): lower \
             workers or start more executors"
        ),
    }
}

/// Where every epoch reads the training rows from, as `workers` partitions: one task each.
pub(super) enum TrainRows {
    /// Embedded: the query's rows, computed once, cut into contiguous runs of nearly equal
    /// rows (slices sharing the query's batches, so a table scan costs no copy).
    Spread(Arc<MemTable>),
    /// On Ballista, or with tables on disk: the query itself, planned with `workers` target
    /// partitions, so its scan's files are grouped into at most that many tasks and no epoch
    /// holds the rows whole; under model rotation, and for a topic model, its rows grouped by
    /// id into `workers` partitions first (a grouping that holds each partition's rows while
    /// it runs).
    Query(LogicalPlan),
}

impl TrainRows {
    /// The rows of `query` for `workers` workers, and how many there are; `by`: the column
    /// whose values split the rows among the workers (by hash), rather than by position.
    async fn new(
        ctx: &SessionContext,
        query: &str,
        (workers, by): (usize, Option<usize>),
        stream_rows: bool,
    ) -> Result<(Self, u64)> {
        let df = ctx.sql(query).await?;
        if stream_rows {
            let rows = df.clone().count().await? as u64;
            let plan = match by {
                Some(column) => grouped_by(df, column)?,
                None => df.logical_plan().clone(),
            };
            return Ok((TrainRows::Query(plan), rows));
        }
        let schema = df.schema().inner().clone();
        let batches = df.collect_partitioned().await?.concat();
        let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
        let parts = match by {
            Some(column) => split_by(batches, column, workers)?,
            None => spread(batches, rows, workers),
        };
        let table = MemTable::try_new(schema, parts)?;
        Ok((TrainRows::Spread(Arc::new(table)), rows))
    }

    /// One epoch: `ps_train` (of every column but the first `skip`) and `count(*)` over the
    /// rows of model `name`, on a session with `workers` target partitions (so no
    /// repartitioning adds or merges workers).
    pub(super) fn epoch(
        &self,
        ctx: &SessionContext,
        (name, workers): (&str, usize),
        skip: usize,
    ) -> Result<DataFrame> {
        let mut state = ctx.state();
        let options = state.config_mut().options_mut();
        options.execution.target_partitions = workers;
        // Each task reads whole files: a staged table has a file per partition of the query
        // that made it (`workers` of them by default). Cut into byte ranges, a file of one
        // row group gives its rows to the range holding its middle, leaving a task empty and
        // another with twice the rows (and under BSP the round waiting for the missing one).
        options.optimizer.repartition_file_scans = false;
        let plan = match self {
            TrainRows::Spread(table) => {
                LogicalPlanBuilder::scan("train_rows", provider_as_source(table.clone()), None)?
                    .build()?
            }
            TrainRows::Query(plan) => plan.clone(),
        };
        let df = DataFrame::new(state, plan);
        let columns: Vec<Expr> = df
            .schema()
            .columns()
            .into_iter()
            .map(Expr::Column)
            .collect();
        let mut args = vec![lit(name)];
        args.extend(columns.into_iter().skip(skip));
        let train = ctx.udaf("ps_train")?.call(args);
        df.aggregate(vec![], vec![train, count_all()])
    }
}

/// The rows of `df` in as many partitions as the query plans (`workers` at every epoch), each
/// holding all the rows of its ids (the values of `column`), the same ones at every epoch
/// whichever tasks read them: each id's rows packed into a list by a grouping on the id
/// (whose partitions are by the id's hash: a shuffle on Ballista), then unpacked. (A plain
/// repartition by hash would be dropped by the optimizer, nothing above it asking for it.)
fn grouped_by(df: DataFrame, column: usize) -> Result<LogicalPlan> {
    let columns = df.schema().columns();
    let packed: Vec<Expr> = (columns.iter().enumerate())
        .flat_map(|(i, c)| [lit(format!("c{i}")), Expr::Column(c.clone())])
        .collect();
    let id = Expr::Column(columns[column].clone());
    let mut rows = "__angel_rows".to_string();
    while columns.iter().any(|c| c.name() == rows) {
        rows.push('_');
    }
    let rows = rows.as_str();
    let unpacked: Vec<Expr> = (columns.iter().enumerate())
        .map(|(i, c)| get_field(col(rows), format!("c{i}")).alias(c.name()))
        .collect();
    let plan = df
        .aggregate(vec![id], vec![array_agg(named_struct(packed)).alias(rows)])?
        .unnest_columns(&[rows])?
        .select(unpacked)?
        .logical_plan()
        .clone();
    Ok(plan)
}

/// The rows of `batches` in `parts` partitions by their integer `column` (an id) modulo
/// `parts`, keeping their order within each.
fn split_by(
    batches: Vec<RecordBatch>,
    column: usize,
    parts: usize,
) -> Result<Vec<Vec<RecordBatch>>> {
    let mut out = vec![Vec::new(); parts];
    for batch in batches {
        let ids = cast(batch.column(column), &DataType::Int64)?;
        let ids = ids.as_primitive::<Int64Type>();
        let mut picks = vec![Vec::new(); parts];
        for r in 0..ids.len() {
            // A NULL or negative id is the training function's error, naming the row.
            let part = ids
                .is_valid(r)
                .then(|| ids.value(r).rem_euclid(parts as i64));
            picks[part.unwrap_or_default() as usize].push(r as u32);
        }
        for (part, rows) in picks.into_iter().enumerate().filter(|(_, r)| !r.is_empty()) {
            out[part].push(take_record_batch(&batch, &UInt32Array::from(rows))?);
        }
    }
    Ok(out)
}

/// `batches` (of `rows` rows in all) cut into `parts` contiguous runs of nearly equal rows;
/// only batches straddling a boundary are sliced.
fn spread(batches: Vec<RecordBatch>, rows: u64, parts: usize) -> Vec<Vec<RecordBatch>> {
    let mut out = vec![Vec::new(); parts];
    let bound = |p: usize| (rows as u128 * p as u128 / parts as u128) as usize;
    let (mut part, mut at) = (0, 0usize);
    for batch in batches {
        let mut offset = 0;
        while offset < batch.num_rows() {
            while part + 1 < parts && at >= bound(part + 1) {
                part += 1;
            }
            let room = match part + 1 < parts {
                true => bound(part + 1) - at,
                false => usize::MAX,
            };
            let take = room.min(batch.num_rows() - offset);
            out[part].push(batch.slice(offset, take));
            (offset, at) = (offset + take, at + take);
        }
    }
    out
}

/// The columns of `query`, for a model of `kind`, as SQL, quoted: the label (or the id of a
/// topic model's documents and a k-means model's points), and the rest joined by commas
/// (indices and optionally values; matrix factorization: user and item).
async fn columns(
    ctx: &SessionContext,
    query: &str,
    kind: &dyn ModelKind,
) -> Result<(String, String)> {
    let df = ctx.sql(query).await?;
    let mut names: Vec<String> = df
        .schema()
        .fields()
        .iter()
        // Quoted as SQL identifiers: names of unnamed expressions hold quotes themselves.
        .map(|f| format!("\"{}\"", f.name().replace('"', "\"\"")))
        .collect();
    let expected = kind.inputs().describe();
    let label = match kind.inputs() {
        Inputs::Pairs => 2,
        Inputs::Features | Inputs::Documents | Inputs::Points => 0,
    };
    let count = match kind.inputs() {
        Inputs::Features | Inputs::Documents | Inputs::Points => 2..=3,
        Inputs::Pairs => 3..=3,
    };
    if !count.contains(&names.len()) {
        return plan_err!(
            "the training query of a {} model must return {expected}; it returns {} columns",
            kind.name(),
            names.len()
        );
    }
    let label = names.remove(label);
    Ok((label, names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;

    #[test]
    fn spread_cuts_contiguous_runs_of_nearly_equal_rows() {
        let batch = |from: i64, n: i64| {
            let values = Int64Array::from_iter_values(from..from + n);
            RecordBatch::try_from_iter([("x", Arc::new(values) as _)]).unwrap()
        };
        let parts = spread(vec![batch(0, 5), batch(5, 1), batch(6, 4)], 10, 3);
        let rows: Vec<Vec<i64>> = parts
            .iter()
            .map(|p| {
                p.iter()
                    .flat_map(|b| {
                        let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                        a.values().to_vec()
                    })
                    .collect()
            })
            .collect();
        assert_eq!(rows, [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8, 9]]);
        assert_eq!(spread(Vec::new(), 0, 2), [vec![], vec![]]);
    }
}
