//! `CREATE MODEL`: creates the model on the PS, trains it for the requested epochs with
//! `ps_train`, evaluates it on the holdout table after each epoch, and returns the epoch table
//! (epoch, rows, train_loss, holdout_loss, holdout_auc, holdout_accuracy, seconds of
//! training, seconds of holdout evaluation, ...).

use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_client::{CounterState, EpochReport, PsClient, PsError};
use angel_proto::{StatusReply, WorkerStatus};
use angel_training::ModelSpec;
use angel_training::kinds::{self, Inputs, Metric, ModelKind};
use datafusion::arrow::array::{
    Array, AsArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array,
};
use datafusion::arrow::compute::{cast, take_record_batch};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::datasource::provider_as_source;
use datafusion::execution::FunctionRegistry;
use datafusion::functions::core::expr_fn::{get_field, named_struct};
use datafusion::functions_aggregate::count::count_all;
use datafusion::functions_aggregate::expr_fn::array_agg;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, lit};
use datafusion::prelude::col;
use datafusion::prelude::{DataFrame, SessionContext};
use indicatif::{ProgressBar, ProgressStyle};

use super::{clusters, epoch_table, lbfgs, topics, trees};
use crate::binding::Binding;
use crate::bridge::{ps_error, train_error};
use crate::reports::Progress;

/// What `CREATE MODEL` asks for beyond the model itself.
pub(super) struct Plan {
    pub(super) spec: ModelSpec,
    pub(super) epochs: usize,
    pub(super) holdout: Option<String>,
}

impl Plan {
    /// Sets `key` if it is an option of the training run (`epochs`, `holdout`) rather than of
    /// the model; says whether it was.
    fn run_option(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "epochs" => match value.parse() {
                Ok(n) if n > 0 => self.epochs = n,
                _ => return plan_err!("epochs must be a positive whole number, got '{value}'"),
            },
            "holdout" => self.holdout = Some(value.to_string()),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Reads the options: model options go to the spec, `epochs` and `holdout` drive training;
/// `counter` (without `dim`) sizes the model from the sealed counter.
async fn plan(binding: &Binding, options: &[(String, String)]) -> Result<Plan> {
    let kind = options
        .iter()
        .find(|(k, _)| k == "kind")
        .map_or("logistic", |(_, v)| v.as_str());
    let mut plan = Plan {
        spec: ModelSpec::new(kinds::by_name(kind).map_err(train_error)?, 0),
        epochs: 5,
        holdout: None,
    };
    for (key, value) in options {
        if !plan.run_option(key, value)? {
            plan.spec.set(key, value).map_err(train_error)?;
        }
    }
    // A full-batch solver's and k-means's epochs are iterations that end on a tolerance: at
    // most 100 unless said (as Spark MLlib's solvers and scikit-learn's).
    let iterative = plan.spec.solver.method.is_some() || plan.spec.kind.clusters().is_some();
    if iterative && !options.iter().any(|(k, _)| k == "epochs") {
        plan.epochs = 100;
    }
    for (option, named, counter) in plan.spec.kind.counted_options() {
        let size = sealed_size(binding, (named, &counter)).await?;
        plan.spec
            .set(option, &size.to_string())
            .map_err(train_error)?;
    }
    if let Some(counter) = plan.spec.counter.clone() {
        let size = sealed_size(binding, ("counter", &counter)).await?;
        match plan.spec.dim {
            0 => plan.spec.dim = size,
            dim if dim < size => {
                return plan_err!(
                    "CREATE MODEL: dim = {dim} is below the {size} features counter '{counter}' \
                     indexed; leave dim out to take it from the counter"
                );
            }
            _ => {}
        }
    }
    if plan.spec.dim == 0 {
        plan.spec.kind.check().map_err(train_error)?;
        return plan_err!(
            "CREATE MODEL needs the option dim (number of features) or counter (a sealed counter)"
        );
    }
    Ok(plan)
}

/// The number of keys sealed counter `counter` (named by model option `option`) indexed; an
/// error saying what to do when it is missing, not sealed, or indexed nothing.
async fn sealed_size(binding: &Binding, (option, counter): (&str, &str)) -> Result<u64> {
    let client = binding.client()?;
    client.refresh().await.map_err(ps_error)?;
    let meta = match client.counter(counter).await {
        Ok(c) => c.meta.clone(),
        Err(PsError::NotFound(_)) => {
            return plan_err!(
                "CREATE MODEL option {option} = '{counter}': no counter of that name; create and \
                 fill it with ps_counter_add, then seal it with ps_counter_seal"
            );
        }
        Err(e) => return Err(ps_error(e)),
    };
    if meta.state != CounterState::Read as i32 {
        return plan_err!(
            "CREATE MODEL option {option} = '{counter}': the counter is not sealed; seal it with \
             ps_counter_seal first"
        );
    }
    if meta.size == 0 {
        return plan_err!(
            "CREATE MODEL option {option} = '{counter}': the counter is sealed but indexed no \
             key (no key was counted min_count = {} times or more)",
            meta.min_count
        );
    }
    Ok(meta.size)
}

/// Checks that the `holdout` option names a table this job can read.
async fn check_holdout(ctx: &SessionContext, holdout: &str) -> Result<()> {
    match ctx.sql(&format!("SELECT * FROM {holdout} LIMIT 0")).await {
        Ok(_) => Ok(()),
        Err(e) => plan_err!("option holdout = '{holdout}': {e}"),
    }
}

/// What runs a statement's training rows.
#[derive(Debug, Clone, Copy)]
pub struct Engine<'a> {
    /// Every epoch runs the training query again instead of holding its rows in memory (on
    /// Ballista, and when the job keeps tables on disk).
    pub stream_rows: bool,
    /// The Ballista scheduler (`df://host:port`), whose live task slots bound how many
    /// workers can train at once.
    pub scheduler: Option<&'a str>,
}

/// Runs `CREATE MODEL`; see the module documentation.
pub async fn create_model(
    ctx: &SessionContext,
    binding: &Binding,
    (name, replace): (&str, bool),
    options: &[(String, String)],
    query: &str,
    engine: Engine<'_>,
) -> Result<RecordBatch> {
    let mut plan = plan(binding, options).await?;
    // Stored qualified: the model finds its dictionary whichever namespace reads it.
    if let Some(counter) = plan.spec.counter.take() {
        plan.spec.counter = Some(binding.client()?.qualify(&counter));
    }
    if plan.spec.sync.workers == 0 {
        plan.spec.sync.workers = ctx.copied_config().target_partitions() as u32;
    }
    plan.spec.sync.check().map_err(train_error)?;
    let rows = Rows::read(ctx, &plan, query, engine).await?;
    if rows.count == 0 {
        return plan_err!("CREATE MODEL {name}: the training query returned no rows");
    }
    if plan.spec.kind.wants_label_mean() {
        let mean = label_mean(ctx, query, &rows.columns).await?;
        plan.spec
            .set("mean", &mean.to_string())
            .map_err(train_error)?;
    }
    let client = binding.client()?;
    if replace {
        client.drop_matrix_if_any(name).await.map_err(ps_error)?;
    }
    let matrix = plan.spec.create(&client, name).await.map_err(train_error)?;
    if plan.spec.kind.topics().is_some() {
        return topics::train(ctx, binding, (name, matrix.meta.id), &plan, rows).await;
    }
    if plan.spec.kind.trees().is_some() {
        return trees::train(ctx, binding, (name, matrix.meta.id), &plan, rows).await;
    }
    if plan.spec.kind.clusters().is_some() {
        clusters::init(ctx, binding, name, &plan, &rows).await?;
    }
    (plan.spec.randomize(&client, name, RANDOM_SEED).await).map_err(train_error)?;
    train(ctx, binding, (name, matrix.meta.id), &plan, rows).await
}

/// The seed of the weights a kind starts at random (matrix factorization's factors), so a
/// job trains the same model at every run.
const RANDOM_SEED: u64 = 0x5eed;

/// The mean label of the training query's rows (`columns`: its columns, the label's first).
async fn label_mean(ctx: &SessionContext, query: &str, columns: &Columns) -> Result<f64> {
    let sql = format!(
        "SELECT avg(CAST({} AS DOUBLE)) FROM ({query}) AS rows",
        columns.label
    );
    let batches = ctx.sql(&sql).await?.collect().await?;
    let mean = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| ScalarValue::try_from_array(b.column(0), 0))
        .transpose()?;
    match mean.as_ref().and_then(float) {
        Some(mean) if mean.is_finite() => Ok(mean),
        _ => plan_err!(
            "the training query's mean label ({}) is not a number",
            columns.label
        ),
    }
}

/// Runs `TRAIN MODEL`: model `name` (created or loaded, with its optimizer state) trains on
/// for more epochs (`epochs`, 1 by default), on the rows of `query`, with its own options; the
/// result is an epoch table as `CREATE MODEL`'s.
pub async fn train_model(
    ctx: &SessionContext,
    binding: &Binding,
    name: &str,
    options: &[(String, String)],
    query: &str,
    engine: Engine<'_>,
) -> Result<RecordBatch> {
    let client = binding.client()?;
    client.refresh().await.map_err(ps_error)?;
    let matrix = match client.matrix(name).await {
        Ok(m) => m,
        Err(PsError::NotFound(_)) => {
            return plan_err!(
                "TRAIN MODEL {name}: no model of that name; create it with CREATE MODEL or load \
                 it with LOAD MODEL"
            );
        }
        Err(e) => return Err(ps_error(e)),
    };
    let mut plan = Plan {
        spec: ModelSpec::of_matrix(name, &matrix.meta).map_err(train_error)?,
        epochs: 1,
        holdout: None,
    };
    if plan.spec.kind.topics().is_some() {
        return plan_err!(
            "TRAIN MODEL {name}: a topic model's token topics live only for the statement that \
             samples them; train it for more epochs with CREATE OR REPLACE MODEL"
        );
    }
    if plan.spec.kind.trees().is_some() {
        return plan_err!(
            "TRAIN MODEL {name}: a boosted model grows all its trees in the statement that \
             creates it; grow more with CREATE OR REPLACE MODEL and a larger trees option"
        );
    }
    for (key, value) in options {
        if !plan.run_option(key, value)? {
            return plan_err!(
                "TRAIN MODEL {name}: option '{key}' is the model's own, set when it was created; \
                 TRAIN MODEL takes epochs and holdout"
            );
        }
    }
    let rows = Rows::read(ctx, &plan, query, engine).await?;
    if rows.count == 0 {
        return plan_err!("TRAIN MODEL {name}: the training query returned no rows");
    }
    train(ctx, binding, (name, matrix.meta.id), &plan, rows).await
}

/// The training rows of a statement, read and checked.
pub(super) struct Rows {
    /// Where every epoch reads them from.
    pub(super) rows: TrainRows,
    /// How many there are.
    pub(super) count: u64,
    /// The query's columns, quoted, for the holdout query.
    pub(super) columns: Columns,
    /// The training query, for passes of their own over its rows (k-means's draws).
    pub(super) query: String,
}

impl Rows {
    /// The rows of `query` for `plan`'s workers, after checking its holdout table.
    async fn read(
        ctx: &SessionContext,
        plan: &Plan,
        query: &str,
        engine: Engine<'_>,
    ) -> Result<Self> {
        if let Some(holdout) = &plan.holdout {
            check_holdout(ctx, holdout).await?;
        }
        let columns = Columns::of(ctx, query, &*plan.spec.kind).await?;
        let workers = plan.spec.sync.workers as usize;
        if let (true, Some(url)) = (plan.spec.sync.rotation, engine.scheduler) {
            check_slots(url, workers).await?;
        }
        // Model rotation: each worker holds its users' rows, so a user's rows go to one. A
        // topic model reading its rows anew every round: each round's worker must get the
        // documents of the one before, whose token topics it reads back.
        let topics = engine.stream_rows && plan.spec.kind.topics().is_some();
        let by_id = (plan.spec.sync.rotation || topics).then_some(0);
        let (rows, count) =
            TrainRows::new(ctx, query, (workers, by_id), engine.stream_rows).await?;
        Ok(Rows {
            rows,
            count,
            columns,
            query: query.to_string(),
        })
    }
}

/// Fails unless the cluster at `url` can run `workers` tasks at once, as model rotation's
/// workers must (the master would otherwise fail the round only after its workers waited).
async fn check_slots(url: &str, workers: usize) -> Result<()> {
    let (executors, slots) = crate::cluster::live_slots(url).await?;
    match slots as usize >= workers {
        true => Ok(()),
        false => plan_err!(
            "parallelism = 'rotation' needs its {workers} workers to train at once, and the \
             cluster at {url} has {slots} live task slots ({executors} executors): lower \
             workers or start more executors"
        ),
    }
}

/// Trains model `name` (matrix `id`) for `plan`'s epochs over `rows`; returns the epoch table.
async fn train(
    ctx: &SessionContext,
    binding: &Binding,
    (name, id): (&str, u32),
    plan: &Plan,
    rows: Rows,
) -> Result<RecordBatch> {
    if plan.spec.solver.method.is_some() {
        return lbfgs::train(ctx, binding, name, plan, rows).await;
    }
    if plan.spec.kind.clusters().is_some() {
        return clusters::train(ctx, binding, name, plan, rows).await;
    }
    let Rows {
        rows: train_rows,
        count: rows,
        columns,
        ..
    } = rows;
    let client = binding.client()?;
    let workers = plan.spec.sync.workers as usize;
    // Rows held in memory reach ps_train as the same batches every epoch: read them once.
    let caching = matches!(train_rows, TrainRows::Spread(_)).then(|| Caching::on(binding, name));
    let bar = bar(rows * plan.epochs as u64, "rows");
    let mut table = EpochTable::default();
    for epoch in 1..=plan.epochs {
        let started = Instant::now();
        let before = push_traffic(&client.status().await.map_err(ps_error)?, &[id]);
        let epoch_frame = train_rows.epoch(ctx, (name, workers), 0)?;
        let (loss, n) = watch(
            &bar,
            (&binding.reports().progress, &client, name),
            (epoch, plan.epochs, true),
            first_row(epoch_frame),
        )
        .await?;
        let trained = started.elapsed();
        let cached = caching.as_ref().map_or(0, |c| c.after_epoch(epoch));
        let status = client.status().await.map_err(ps_error)?;
        let after = push_traffic(&status, &[id]);
        let traffic = traffic(before, after);
        let holdout = match &plan.holdout {
            Some(h) => evaluate(ctx, name, &*plan.spec.kind, &columns, h).await?,
            None => Holdout::default(),
        };
        let rows = float(&n).unwrap_or_default() as i64;
        let evaluated = started.elapsed() - trained;
        let figures = (rows as u64, float(&loss), trained.as_secs_f64());
        report(&client, (name, epoch), figures, &holdout).await;
        // Half the squared error is the loss of the kinds that report RMSE.
        let rmse = (metrics(&*plan.spec.kind).contains(&Metric::Rmse))
            .then(|| float(&loss).map(|l| (2.0 * l).sqrt()))
            .flatten();
        table.push(
            (epoch, rows, cached),
            (loss, rmse),
            &holdout,
            (trained, evaluated),
            traffic,
            &Round::of(&status, &client.qualify(name)),
        );
    }
    bar.finish_and_clear();
    epoch_table::register(ctx, name, table.finish()?)
}

/// Key-list caching of a model's training batches, and keeping its rotation workers from
/// epoch to epoch: on while this lives.
pub(super) struct Caching<'a> {
    binding: &'a Binding,
    model: &'a str,
    /// Batches found cached before the current epoch.
    found: std::cell::Cell<u64>,
}

impl<'a> Caching<'a> {
    pub(super) fn on(binding: &'a Binding, model: &'a str) -> Self {
        binding.key_lists().enable(model);
        binding.kept().enable(model);
        binding.topic_workers().enable(model);
        binding.tree_workers().enable(model);
        Caching {
            binding,
            model,
            found: Default::default(),
        }
    }

    /// The first epoch filled the cache; after the second, a cache nothing was found in (the
    /// query makes new arrays at every epoch) goes. Returns the batches the epoch found.
    fn after_epoch(&self, epoch: usize) -> u64 {
        let lists = self.binding.key_lists();
        let found = lists.hits(self.model) - self.found.replace(lists.hits(self.model));
        match epoch {
            1 => lists.seal(self.model),
            2 if found == 0 => lists.disable(self.model),
            _ => {}
        }
        found
    }
}

impl Drop for Caching<'_> {
    fn drop(&mut self) {
        self.binding.key_lists().disable(self.model);
        self.binding.kept().disable(self.model);
        self.binding.topic_workers().disable(self.model);
        self.binding.tree_workers().disable(self.model);
    }
}

/// (bytes sent, raw bytes) of every push to matrix `id` so far, from the master's status:
/// what every executor or task pushed, compressed or not.
pub(super) fn push_traffic(status: &StatusReply, ids: &[u32]) -> (u64, u64) {
    angel_proto::pushes::totals(status)
        .iter()
        .filter(|p| ids.contains(&p.matrix_id))
        .fold((0, 0), |(b, r), p| (b + p.bytes, r + p.raw_bytes))
}

/// The push traffic between two readings of [`push_traffic`]. A server that died in between
/// takes its counts with it, so the difference is then a lower bound, not an underflow.
pub(super) fn traffic(before: (u64, u64), after: (u64, u64)) -> (u64, u64) {
    (
        after.0.saturating_sub(before.0),
        after.1.saturating_sub(before.1),
    )
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

/// What the master saw of an epoch's workers: how many, their waits, the slow ones.
struct Round {
    workers: i64,
    wait_seconds: f64,
    slow: String,
}

impl Round {
    fn of(status: &StatusReply, model: &str) -> Round {
        let workers: Vec<&WorkerStatus> =
            status.workers.iter().filter(|w| w.model == model).collect();
        let slow: Vec<String> = workers
            .iter()
            .filter(|w| w.slow)
            .map(|w| {
                format!(
                    "rank {} ({:.1} steps/s; others waited {:.1} s)",
                    w.rank,
                    w.steps_per_sec,
                    w.caused_wait_ms as f64 / 1e3
                )
            })
            .collect();
        Round {
            workers: workers.len() as i64,
            wait_seconds: workers.iter().map(|w| w.waited_ms as f64 / 1e3).sum(),
            slow: slow.join("; "),
        }
    }
}

/// The training query's columns as SQL, quoted: the label, and the rest (indices and
/// optionally values; matrix factorization: user and item).
pub(super) struct Columns {
    /// The label, or the id of a topic model's documents and a k-means model's points.
    pub(super) label: String,
    pub(super) inputs: String,
}

impl Columns {
    /// The columns of `query`, for a model of `kind`.
    async fn of(ctx: &SessionContext, query: &str, kind: &dyn ModelKind) -> Result<Self> {
        let df = ctx.sql(query).await?;
        let mut names: Vec<String> = df
            .schema()
            .fields()
            .iter()
            // Quoted as SQL identifiers: names of unnamed expressions hold quotes themselves.
            .map(|f| format!("\"{}\"", f.name().replace('"', "\"\"")))
            .collect();
        let (expected, label) = match kind.inputs() {
            Inputs::Features => ("label, indices [, values]", 0),
            Inputs::Pairs => ("user, item, rating", 2),
            Inputs::Documents => ("doc, words [, counts]", 0),
            Inputs::Points => ("id, point or id, indices, values", 0),
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
        Ok(Columns {
            label,
            inputs: names.join(", "),
        })
    }
}

/// An epoch's holdout figures: the mean of the model's own loss (`ps_loss`, the loss
/// `train_loss` reports), and the metrics its kind names (AUC, accuracy).
#[derive(Debug, Default)]
pub(super) struct Holdout {
    pub(super) loss: Option<f64>,
    pub(super) auc: Option<f64>,
    pub(super) accuracy: Option<f64>,
    pub(super) rmse: Option<f64>,
}

/// Reports epoch `epoch` of model `name` to the master, for the status page's curves: its
/// (rows, training loss, seconds) and holdout figures. A diverged epoch's NaN loss is
/// reported as missing.
pub(super) async fn report(
    client: &PsClient,
    (name, epoch): (&str, usize),
    (rows, train_loss, seconds): (u64, Option<f64>, f64),
    holdout: &Holdout,
) {
    let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
    let report = EpochReport {
        model: name.to_string(),
        epoch: epoch as u32,
        rows,
        train_loss: finite(train_loss),
        holdout_loss: finite(holdout.loss),
        holdout_auc: finite(holdout.auc),
        holdout_accuracy: finite(holdout.accuracy),
        seconds,
    };
    // The curves are for people watching; training goes on without them.
    if let Err(e) = client.report_epoch(report).await {
        tracing::warn!(
            model = name,
            epoch,
            "the master did not take the epoch report: {e}"
        );
    }
}

/// Scores the holdout table with the model; see [`Holdout`].
pub(super) async fn evaluate(
    ctx: &SessionContext,
    model: &str,
    kind: &dyn ModelKind,
    columns: &Columns,
    holdout: &str,
) -> Result<Holdout> {
    let (label, features) = (&columns.label, &columns.inputs);
    let metric = |m: Metric, sql: &'static str| match metrics(kind).contains(&m) {
        true => sql,
        false => "CAST(NULL AS DOUBLE)",
    };
    let sql = format!(
        "SELECT avg(l) AS loss, {} AS auc, {} AS accuracy, {} AS rmse FROM (SELECT CAST({label} \
         AS DOUBLE) AS y, ps_predict('{model}', {features}) AS p, ps_loss('{model}', {label}, \
         {features}) AS l FROM {holdout}) AS scored",
        metric(Metric::Auc, "ps_auc(y, p)"),
        metric(Metric::Accuracy, "ps_accuracy(y, p)"),
        metric(Metric::Rmse, "ps_rmse(y, p)"),
    );
    let batches = ctx.sql(&sql).await?.collect().await?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return plan_err!("the holdout evaluation answered no row");
    };
    let value = |i| ScalarValue::try_from_array(batch.column(i), 0).map(|v| float(&v));
    Ok(Holdout {
        loss: value(0)?,
        auc: value(1)?,
        accuracy: value(2)?,
        rmse: value(3)?,
    })
}

/// The holdout metrics of a kind that scores rows (none for the topic model).
fn metrics(kind: &dyn ModelKind) -> &'static [Metric] {
    kind.scoring().map_or(&[], |g| g.metrics())
}

/// The first two values of the frame's first row.
pub(super) async fn first_row(df: DataFrame) -> Result<(ScalarValue, ScalarValue)> {
    let batches = df.collect().await?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return plan_err!("a query that answers one row answered none");
    };
    Ok((
        ScalarValue::try_from_array(batch.column(0), 0)?,
        ScalarValue::try_from_array(batch.column(1), 0)?,
    ))
}

pub(super) fn float(v: &ScalarValue) -> Option<f64> {
    match v.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(f)) => f,
        _ => None,
    }
}

pub(super) fn bar(total: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{msg}} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit}, {{per_sec}}, ETA {{eta}}"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

/// Drives `work` while moving the bar with the rows `ps_train` reports, showing the loss
/// (when `loss`: the topic model reports none as it goes). Tasks in this process count in
/// `progress` at once; tasks in other processes (Ballista executors) count at the PS master,
/// in model `name`'s totals, which `client` reads.
pub(super) async fn watch<T>(
    bar: &ProgressBar,
    (progress, client, name): (&Progress, &PsClient, &str),
    (epoch, epochs, shows_loss): (usize, usize, bool),
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    // Best effort: a master that does not answer leaves the bar to this process's tasks.
    let trained = || async { (client.report_trained_rows(name, 0, 0.0).await).unwrap_or_default() };
    let (local0, remote0) = (progress.snapshot(), trained().await);
    let base = bar.position();
    let update = |remote: (u64, f64)| {
        let (rows, loss) = progress.snapshot();
        let local = (rows - local0.0, loss - local0.1);
        let remote = (remote.0.saturating_sub(remote0.0), remote.1 - remote0.1);
        // This process's tasks report to the master too, later: the larger count is current.
        let (n, sum) = if remote.0 > local.0 { remote } else { local };
        let mean = if n > 0 { sum / n as f64 } else { f64::NAN };
        bar.set_position(base + n);
        bar.set_message(match shows_loss {
            true => format!("epoch {epoch}/{epochs} loss {mean:.4}"),
            false => format!("epoch {epoch}/{epochs}"),
        });
    };
    tokio::pin!(work);
    loop {
        tokio::select! {
            result = &mut work => {
                update(trained().await);
                return result;
            }
            _ = tokio::time::sleep(Duration::from_millis(250)) => update(trained().await),
        }
    }
}

/// The rows of the epoch table being built.
#[derive(Default)]
struct EpochTable {
    epoch: Vec<i64>,
    rows: Vec<i64>,
    train_loss: Vec<Option<f64>>,
    holdout_loss: Vec<Option<f64>>,
    holdout_auc: Vec<Option<f64>>,
    holdout_accuracy: Vec<Option<f64>>,
    seconds: Vec<f64>,
    holdout_seconds: Vec<f64>,
    push_mb: Vec<f64>,
    raw_mb: Vec<f64>,
    workers: Vec<i64>,
    wait_seconds: Vec<f64>,
    slow_workers: Vec<String>,
    cached_batches: Vec<i64>,
    train_rmse: Vec<Option<f64>>,
    holdout_rmse: Vec<Option<f64>>,
}

impl EpochTable {
    /// Adds an epoch: its rows, the record batches it found in the key-list cache and its
    /// loss (and training RMSE), holdout figures, (training, holdout) time and (sent, raw) push bytes, and what
    /// the master saw of its workers.
    fn push(
        &mut self,
        (epoch, rows, cached): (usize, i64, u64),
        (loss, rmse): (ScalarValue, Option<f64>),
        holdout: &Holdout,
        took: (Duration, Duration),
        traffic: (u64, u64),
        round: &Round,
    ) {
        self.workers.push(round.workers);
        self.wait_seconds.push(round.wait_seconds);
        self.slow_workers.push(round.slow.clone());
        self.cached_batches.push(cached as i64);
        self.push_mb.push(traffic.0 as f64 / 1e6);
        self.raw_mb.push(traffic.1 as f64 / 1e6);
        self.epoch.push(epoch as i64);
        self.rows.push(rows);
        self.train_loss.push(float(&loss));
        self.train_rmse.push(rmse);
        self.holdout_loss.push(holdout.loss);
        self.holdout_auc.push(holdout.auc);
        self.holdout_accuracy.push(holdout.accuracy);
        self.holdout_rmse.push(holdout.rmse);
        self.seconds.push(took.0.as_secs_f64());
        self.holdout_seconds.push(took.1.as_secs_f64());
    }

    fn finish(self) -> Result<RecordBatch> {
        let schema = Schema::new(vec![
            Field::new("epoch", DataType::Int64, false),
            Field::new("rows", DataType::Int64, false),
            Field::new("train_loss", DataType::Float64, true),
            Field::new("holdout_loss", DataType::Float64, true),
            Field::new("holdout_auc", DataType::Float64, true),
            Field::new("holdout_accuracy", DataType::Float64, true),
            Field::new("seconds", DataType::Float64, false),
            Field::new("holdout_seconds", DataType::Float64, false),
            Field::new("push_mb", DataType::Float64, false),
            Field::new("raw_mb", DataType::Float64, false),
            Field::new("workers", DataType::Int64, false),
            Field::new("wait_seconds", DataType::Float64, false),
            Field::new("slow_workers", DataType::Utf8, false),
            Field::new("cached_batches", DataType::Int64, false),
            Field::new("train_rmse", DataType::Float64, true),
            Field::new("holdout_rmse", DataType::Float64, true),
        ]);
        Ok(RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(self.epoch)),
                Arc::new(Int64Array::from(self.rows)),
                Arc::new(Float64Array::from(self.train_loss)),
                Arc::new(Float64Array::from(self.holdout_loss)),
                Arc::new(Float64Array::from(self.holdout_auc)),
                Arc::new(Float64Array::from(self.holdout_accuracy)),
                Arc::new(Float64Array::from(self.seconds)),
                Arc::new(Float64Array::from(self.holdout_seconds)),
                Arc::new(Float64Array::from(self.push_mb)),
                Arc::new(Float64Array::from(self.raw_mb)),
                Arc::new(Int64Array::from(self.workers)),
                Arc::new(Float64Array::from(self.wait_seconds)),
                Arc::new(StringArray::from(self.slow_workers)),
                Arc::new(Int64Array::from(self.cached_batches)),
                Arc::new(Float64Array::from(self.train_rmse)),
                Arc::new(Float64Array::from(self.holdout_rmse)),
            ],
        )?)
    }
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
