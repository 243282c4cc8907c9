//! Jobs: a whole SQL file run statement by statement on a DataFusion session whose angel-ps
//! functions talk to one service. Model statements (`CREATE MODEL`, `SAVE MODEL`,
//! `LOAD MODEL`) are handled here; everything else is DataFusion's.
//!
//! - [`script`]: variables and statement splitting.
//! - [`counters`]: the counters a run fills, each started afresh.
//! - [`statement`]: recognising the model statements, with [`depth`] refusing SQL that
//!   nests too deep to plan.
//! - [`train`]: `CREATE MODEL` and `TRAIN MODEL`, handed to their kind's driver
//!   (`angel_training::ModelKind::drive`) on [`session_engine`], the job's session as the
//!   engine a driver runs on.
//! - What the statements share, each in its own file: [`plan`] (reading the statement's
//!   options), [`train_rows`] (its rows and where each epoch reads them), [`caching`]
//!   (keeping batches and workers across epochs), [`progress`] (the bar moved as tasks
//!   report), [`answers`] (one-row answers), [`epoch_table`] (the epoch table registered).
//! - [`lifetimes`]: the statement after which each table or view the job created is used no
//!   more, where a run drops it.
//! - [`resume`]: a run's hold on its job at the master, and what an earlier run that was
//!   killed completed, so the job resumes after it.
//! - [`saved`]: `SAVE MODEL` / `LOAD MODEL`: the files of the tables each kind saves, their
//!   versions and the JSON metadata, with [`table_files`] writing the tables as the kind
//!   reads them and [`parquet_file`] reading them back.

mod answers;
mod caching;
pub mod counters;
pub mod depth;
mod epoch_table;
pub mod lifetimes;
mod parquet_file;
mod plan;
mod progress;
pub mod resume;
pub mod saved;
pub mod script;
mod session_engine;
pub mod statement;
mod table_files;
pub mod train;
mod train_rows;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_client::PsClient;
use angel_etl::bad_rows::Skipped;
use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{DataFusionError, Result, TableReference, plan_err};
use datafusion::functions_aggregate::expr_fn::sum;
use datafusion::prelude::{DataFrame, SessionContext, col};

use statement::Statement;

use crate::ballista::stage::arrow_table;
use crate::ballista::{Stage, StageWriteNode};
use crate::binding::Binding;
use crate::bridge::ps_error;
use crate::reports::Reports;
use crate::spilling_table::SpillingTable;
use crate::storage_level::{StorageLevel, TableStorage};
use resume::{Resume, Step};
use train::Training;
use train_rows::RowReading;

/// What one statement did.
#[derive(Debug)]
pub struct StatementReport {
    /// Line of the job file it starts on.
    pub line: usize,
    /// Its first words, to name it in summaries.
    pub label: String,
    /// The whole statement, after variable substitution.
    pub sql: String,
    /// Wall time.
    pub took: Duration,
    /// Its result (the epoch table for `CREATE MODEL`).
    pub output: Vec<RecordBatch>,
    /// Input rows its readers skipped (`bad_rows=skip`).
    pub skipped: Skipped,
    /// Changes this process's client replayed to partitions restored from snapshots during
    /// the statement, and changes it could not replay (lost).
    pub replayed: (u64, u64),
}

impl StatementReport {
    /// The epoch table, if this statement was `CREATE MODEL` or `TRAIN MODEL`.
    pub fn epoch_table(&self) -> Option<&RecordBatch> {
        let model = matches!(
            Statement::parse(&self.sql),
            Ok(Statement::CreateModel { .. } | Statement::TrainModel { .. })
        );
        self.output.first().filter(|_| model)
    }
}

/// A session bound to a service, ready to run job files. Its functions report to the job
/// ([`Job::reports`]), never to another job of the same process.
pub struct Job {
    ctx: SessionContext,
    binding: Binding,
    /// Where tables live when the session runs on a Ballista cluster.
    stage: Option<Arc<Stage>>,
    /// That cluster's scheduler (`df://host:port`), asked for its live task slots.
    scheduler: Option<String>,
    /// Where tables live on one machine.
    tables: Arc<TableStorage>,
    /// The directory of tables kept on disk, removed when the job and its tables are gone.
    spill: Option<Arc<tempfile::TempDir>>,
    /// The counters this run has counted into.
    counters: Arc<counters::Started>,
}

impl Job {
    /// Registers every angel-ps function on `ctx` for the service at `master`.
    pub fn new(ctx: SessionContext, master: &str) -> Self {
        let binding = Binding::new(master, Reports::default());
        crate::register_all(&ctx, &binding, None);
        Job {
            ctx,
            binding,
            stage: None,
            scheduler: None,
            tables: Arc::default(),
            spill: None,
            counters: Arc::default(),
        }
    }

    /// Keeps the tables the job creates on one machine in `tables` (by default in memory, as
    /// DataFusion does), with a temporary directory for those on disk.
    pub fn keeping_tables(mut self, tables: TableStorage) -> Result<Self> {
        if tables.level() != StorageLevel::Memory {
            let dir = tempfile::Builder::new().prefix("angel-tables-").tempdir();
            let dir = dir.map_err(|e| {
                DataFusionError::Execution(format!(
                    "cannot create a directory for tables in {}: {e}",
                    std::env::temp_dir().display()
                ))
            })?;
            self.spill = Some(Arc::new(dir));
        }
        self.tables = Arc::new(tables);
        Ok(self)
    }

    /// A job on a Ballista session ([`crate::ballista::connect`]) to the scheduler at
    /// `scheduler`: tables are kept as Parquet in `stage`, which every executor must be able
    /// to read.
    pub fn on_cluster(ctx: SessionContext, master: &str, scheduler: &str, stage: Stage) -> Self {
        let stage = Arc::new(stage);
        let binding = Binding::new(master, Reports::default());
        crate::register_all(&ctx, &binding, Some(stage.clone()));
        Job {
            ctx,
            binding,
            stage: Some(stage),
            scheduler: Some(scheduler.to_string()),
            tables: Arc::default(),
            spill: None,
            counters: Arc::default(),
        }
    }

    /// The same job with its matrix and counter names in `namespace` (`namespace/name` on the
    /// service), unseen by jobs in other namespaces unless they qualify a name on purpose
    /// (`'ns/name'`). Without it names are taken as given.
    pub fn in_namespace(mut self, namespace: &str) -> Self {
        self.binding = self.binding.in_namespace(namespace);
        crate::register_all(&self.ctx, &self.binding, self.stage.clone());
        self
    }

    /// The session, for queries after the job. A [`Job::run`] has dropped the tables it
    /// created after their last use in the job ([`lifetimes`]); [`Job::execute`] keeps them.
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// What this job's functions reported: rows trained, input rows skipped.
    pub fn reports(&self) -> &Reports {
        self.binding.reports()
    }

    /// What this process's client of the service has replayed and lost so far (zeros when
    /// the service cannot be reached).
    async fn replay_counts(&self) -> (u64, u64) {
        PsClient::shared_in(self.binding.master(), self.binding.namespace())
            .await
            .map_or((0, 0), |client| client.replay_counts())
    }

    /// Runs the job text (after substituting `vars`), calling `each` after every statement.
    /// An error names the file and line of the statement that failed. The run holds the job
    /// on the service while it runs, and resumes where an earlier run of it that was killed
    /// stopped ([`resume`]).
    pub async fn run(
        &self,
        file: &str,
        text: &str,
        vars: &HashMap<String, String>,
        each: impl FnMut(&StatementReport),
    ) -> Result<Vec<StatementReport>> {
        let text = script::substitute(text, vars)?;
        let resume = Resume::start(self.binding.client()?, &text)
            .await
            .map_err(|e| DataFusionError::Context(file.to_string(), Box::new(e)))?;
        if resume.earlier() != (0, 0) {
            let (statements, epochs) = resume.earlier();
            tracing::info!(
                statements,
                epochs,
                "an earlier run of this job stopped; resuming after what it completed"
            );
        }
        let ran = self.run_statements(file, &text, &resume, each).await;
        resume.end().await;
        ran
    }

    /// The statements of `text` under `resume`'s hold, then the job's end.
    async fn run_statements(
        &self,
        file: &str,
        text: &str,
        resume: &Resume,
        mut each: impl FnMut(&StatementReport),
    ) -> Result<Vec<StatementReport>> {
        let mut reports = Vec::new();
        let statements = script::statements(text);
        let sqls: Vec<String> = statements.iter().map(|(_, sql)| sql.clone()).collect();
        let drops = lifetimes::drops_after(&sqls);
        for (index, (line, sql)) in statements.into_iter().enumerate() {
            resume.check()?;
            let started = Instant::now();
            let replays_before = self.replay_counts().await;
            let step = resume.step(index);
            let ran = self.execute_step(&sql, step, Some(resume)).await;
            let ran = ran.map_err(|e| {
                let e = if self.stage.is_some() {
                    crate::ballista::explain(e)
                } else {
                    e
                };
                let e = match e {
                    DataFusionError::SQL(..) => {
                        DataFusionError::Plan(script::file_lines(&e.to_string(), line))
                    }
                    e => e,
                };
                DataFusionError::Context(format!("{file}:{line}"), Box::new(e))
            })?;
            // None: the statement wrote a model an earlier run completed.
            let (output, earlier) = match ran {
                Some(output) => (output, false),
                None => (Vec::new(), true),
            };
            resume.statement_done(index).await?;
            self.drop_tables(&drops[index])?;
            let report = StatementReport {
                line,
                label: match earlier {
                    true => format!("{} (done by an earlier run)", label(&sql)),
                    false => label(&sql),
                },
                took: started.elapsed(),
                output,
                sql,
                skipped: self.reports().bad_rows.take(),
                replayed: {
                    let (replayed, lost) = self.replay_counts().await;
                    (replayed - replays_before.0, lost - replays_before.1)
                },
            };
            each(&report);
            reports.push(report);
        }
        self.finish(file, &reports).await?;
        Ok(reports)
    }

    /// Drops tables and views of the job that no later statement uses ([`lifetimes`]): their
    /// memory, or their files, are freed as the job goes on.
    fn drop_tables(&self, names: &[String]) -> Result<()> {
        for name in names {
            let dropped = self
                .ctx
                .deregister_table(TableReference::bare(name.as_str()))?;
            if dropped.is_some() {
                tracing::debug!(table = %name, "dropped after its last use in the job");
            }
        }
        Ok(())
    }

    /// A job's end: what it changed is snapshotted before it says it succeeded (nobody is left
    /// to replay its changes to a server that dies later), and a job some of whose changes were
    /// lost fails.
    async fn finish(&self, file: &str, reports: &[StatementReport]) -> Result<()> {
        let client = PsClient::shared_in(self.binding.master(), self.binding.namespace())
            .await
            .map_err(ps_error)?;
        client.make_durable().await.map_err(|e| {
            DataFusionError::Execution(format!(
                "{file}: the job's changes could not be snapshotted at its end, so the loss of \
                 a server now would lose them: {e}"
            ))
        })?;
        let lost: u64 = reports.iter().map(|r| r.replayed.1).sum();
        if lost > 0 {
            return Err(DataFusionError::Execution(format!(
                "{file}: {lost} acknowledged changes were lost when a server died (dropped from \
                 the replay buffer before a snapshot held them): the model is not what the job \
                 computed. Snapshot more often (--snapshot-interval-secs) or give the buffer \
                 more room ({})",
                angel_client::REPLAY_MB_VAR
            )));
        }
        Ok(())
    }

    /// Runs one statement and collects its result. A counter it counts into that this run
    /// has not yet is replaced first ([`counters`]).
    pub async fn execute(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        let ran = self.execute_step(sql, Step::Run, None).await?;
        Ok(ran.unwrap_or_default())
    }

    /// Runs one statement as `step` says, recording its epochs with `resume`; None for a
    /// statement writing a model that an earlier run completed, which is skipped.
    async fn execute_step(
        &self,
        sql: &str,
        step: Step,
        resume: Option<&Resume>,
    ) -> Result<Option<Vec<RecordBatch>>> {
        let statement = Statement::parse(sql)?;
        let writes_model = matches!(
            statement,
            Statement::CreateModel { .. }
                | Statement::TrainModel { .. }
                | Statement::LoadModel { .. }
        );
        if step == Step::Done && writes_model {
            return Ok(None);
        }
        let training = Training {
            resume,
            done_epochs: match step {
                Step::Resume(epochs) => Some(epochs),
                Step::Run | Step::Done => None,
            },
        };
        if let Some(query) = statement.query() {
            self.start_counters(query).await?;
        }
        let reading = RowReading {
            // A staged or spilled job runs a model's training query each epoch, not from
            // memory.
            stream_rows: self.stage.is_some() || self.spill.is_some(),
            scheduler: self.scheduler.as_deref(),
        };
        let output = match statement {
            Statement::Sql(sql) => self.ctx.sql(&sql).await?.collect().await,
            Statement::CreateTable {
                name,
                replace,
                query,
                sql,
            } => match (&self.stage, &self.spill) {
                (Some(stage), _) => self.stage_table(stage, &name, replace, &query).await,
                (None, Some(dir)) => self.keep_table(dir, &name, replace, &query).await,
                (None, None) => self.ctx.sql(&sql).await?.collect().await,
            },
            Statement::CreateModel {
                name,
                replace,
                options,
                query,
            } => {
                let table = train::create_model(
                    (&self.ctx, &self.binding),
                    (&name, replace),
                    &options,
                    &query,
                    (reading, training),
                )
                .await?;
                Ok(vec![table])
            }
            Statement::TrainModel {
                name,
                options,
                query,
            } => {
                let table = train::train_model(
                    (&self.ctx, &self.binding),
                    &name,
                    &options,
                    &query,
                    (reading, training),
                )
                .await?;
                Ok(vec![table])
            }
            Statement::SaveModel { name, path } => {
                let client = self.binding.client()?;
                saved::save(&self.ctx, &client, &name, &path).await?;
                Ok(Vec::new())
            }
            Statement::LoadModel { name, path } => {
                let client = self.binding.client()?;
                saved::load(&client, &name, &path).await?;
                Ok(Vec::new())
            }
            Statement::Snapshot => {
                let reply = self.binding.client()?.snapshot().await.map_err(ps_error)?;
                Ok(vec![snapshot_table(&reply)?])
            }
        };
        output.map(Some)
    }
}

impl Job {
    /// Replaces each counter `sql` counts into that this run has not counted into yet. A
    /// statement that does not plan is left to fail when it runs, with its usual error.
    async fn start_counters(&self, sql: &str) -> Result<()> {
        let Ok(plan) = self.ctx.state().create_logical_plan(sql).await else {
            return Ok(());
        };
        let fresh = self.counters.fresh_in(&plan)?;
        if fresh.is_empty() {
            return Ok(());
        }
        let client = self.binding.client()?;
        for name in fresh {
            client.replace_counter(&name).await.map_err(ps_error)?;
            self.counters.mark(&name);
            tracing::debug!(counter = %name, "counter started afresh for this run");
        }
        Ok(())
    }

    /// `CREATE TABLE name AS query` on a cluster: the executors write the rows into a new
    /// stage directory, a file per partition ([`StageWriteNode`]), and the table is read from
    /// there; a query that reads a staged table whole names its files instead. Returns the
    /// rows written.
    async fn stage_table(
        &self,
        stage: &Stage,
        name: &str,
        replace: bool,
        query: &str,
    ) -> Result<Vec<RecordBatch>> {
        if !replace && self.ctx.table_exist(name)? {
            return plan_err!("table '{name}' already exists");
        }
        let rows = self.ctx.sql(query).await?;
        let (table, counts) = match stage.whole_table(&rows.clone().into_optimized_plan()?) {
            Some(table) => (table, Vec::new()),
            None => {
                let dir = stage.table_dir(name);
                let schema = Arc::new(rows.schema().as_arrow().clone());
                let input = rows.into_unoptimized_plan();
                let write = StageWriteNode::plan(&self.ctx.state(), &dir, input).await?;
                let counts = DataFrame::new(self.ctx.state(), write)
                    .aggregate(vec![], vec![sum(col("count")).alias("count")])?
                    .collect()
                    .await?;
                (arrow_table(&dir, schema)?, counts)
            }
        };
        if replace {
            self.ctx.deregister_table(name)?;
        }
        self.ctx.register_table(name, table)?;
        Ok(counts)
    }
}

impl Job {
    /// `CREATE TABLE name AS query` kept at the job's storage level, with files in `dir`.
    async fn keep_table(
        &self,
        dir: &Arc<tempfile::TempDir>,
        name: &str,
        replace: bool,
        query: &str,
    ) -> Result<Vec<RecordBatch>> {
        if !replace && self.ctx.table_exist(name)? {
            return plan_err!("table '{name}' already exists");
        }
        let storage = self.tables.clone();
        let table = SpillingTable::create(&self.ctx, name, query, storage, dir.clone()).await?;
        if replace {
            self.ctx.deregister_table(name)?;
        }
        self.ctx.register_table(name, Arc::new(table))?;
        Ok(Vec::new())
    }
}

/// What `SNAPSHOT` wrote, as a one-row table.
fn snapshot_table(reply: &angel_client::SnapshotReply) -> Result<RecordBatch> {
    let column = |v: u64| Arc::new(UInt64Array::from(vec![v])) as ArrayRef;
    let schema = Schema::new(
        ["partitions", "bytes", "millis", "max_pause_us"]
            .map(|name| Field::new(name, DataType::UInt64, false))
            .to_vec(),
    );
    Ok(RecordBatch::try_new(
        Arc::new(schema),
        vec![
            column(reply.partitions),
            column(reply.bytes),
            column(reply.millis),
            column(reply.max_pause_us),
        ],
    )?)
}

/// The first words of a statement, at most 60 characters.
fn label(sql: &str) -> String {
    let flat: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}
