//! The driver half of a kind: what runs a `CREATE MODEL` or `TRAIN MODEL` statement between
//! and around its passes over the rows. A kind drives its statement
//! ([`crate::ModelKind::drive`]) on an [`Engine`], which the SQL layer implements: the engine
//! runs passes of `ps_train` over the statement's rows and queries of its SQL; the driver does
//! the rest on the servers and answers the epoch table. No driver knows the engine, and the
//! engine knows no kind.
//!
//! - [`plan`]: [`Plan`], what the statement asks for (the spec, epochs, holdout).
//! - [`epochs`]: the default driver, a pass of mini-batch steps per epoch (a full-batch
//!   solver's is [`crate::lbfgs::driver`]).
//! - [`holdout`]: an epoch's holdout figures, scored by the model's SQL functions.
//! - [`progress`]: the progress bar and the epoch reports for the master's curves.
//! - [`traffic`]: the push traffic of a statement's matrices.
//! - [`epoch_table`]: the epoch table from its rows.
//! - [`answers`]: numbers read from a query's answer.

pub mod answers;
pub mod epoch_table;
pub mod epochs;
pub mod holdout;
pub mod plan;
pub mod progress;
pub mod traffic;

use std::sync::Arc;

use angel_client::PsClient;
use arrow::array::RecordBatch;
use indicatif::ProgressBar;

use crate::error::Result;
use crate::kept::Kept;

pub use plan::Plan;

/// What the engine running a statement offers its kind's driver.
#[async_trait::async_trait]
pub trait Engine: Sync {
    /// The model the statement trains.
    fn model(&self) -> &str;

    /// The service, in the job's namespace.
    fn client(&self) -> &Arc<PsClient>;

    /// What the statement asks for.
    fn plan(&self) -> &Plan;

    /// The statement's training query.
    fn query(&self) -> &TrainingQuery;

    /// One pass of `ps_train` over the rows, on every column but the first `skip`, with
    /// `watch`'s bar moving as the tasks report their rows.
    async fn pass(&self, skip: usize, watch: Option<Watch<'_>>) -> Result<Passed>;

    /// The answer of `sql`, which may name the tables of the job and the model functions
    /// (`ps_predict`, `ps_distance`, ...).
    async fn answer(&self, sql: &str) -> Result<Vec<RecordBatch>>;

    /// After epoch `epoch` of a statement whose rows are held in memory: the record batches
    /// the epoch found in the key-list cache (0 otherwise).
    fn cached_after(&self, epoch: usize) -> u64;

    /// What the statement's workers keep from round to round in this process.
    fn kept(&self) -> &Kept;
}

/// A statement's training query, as its own SQL and its columns name it.
#[derive(Debug, Clone)]
pub struct TrainingQuery {
    /// The query itself, for queries of a driver's own over its rows (k-means's draws).
    pub sql: String,
    /// The rows it returns.
    pub rows: u64,
    /// Its first column, quoted: the label, or the id of a topic model's documents and a
    /// k-means model's points.
    pub label: String,
    /// The others, quoted and joined by commas (indices and optionally values; matrix
    /// factorization: user and item).
    pub inputs: String,
    /// Whether every pass reads its rows from memory (then workers stay from round to round
    /// in the job), rather than running the query anew (Ballista, tables on disk).
    pub in_memory: bool,
}

/// What a pass of `ps_train` answered.
#[derive(Debug, Clone, Copy)]
pub struct Passed {
    /// The mean the workers answered (their loss per row; a topic model's documents'
    /// log-likelihood per token; a boosted model's sketch round: its mean target).
    pub mean: Option<f64>,
    /// The rows the pass counted.
    pub rows: u64,
}

/// A progress bar a pass moves, and the epoch it shows.
#[derive(Debug, Clone, Copy)]
pub struct Watch<'a> {
    /// The bar, moved by the rows the tasks report.
    pub bar: &'a ProgressBar,
    /// The epoch (of `epochs`) the bar's message shows.
    pub epoch: usize,
    /// How many epochs the statement runs.
    pub epochs: usize,
    /// Whether the message shows the loss so far (the topic model reports none as it goes).
    pub shows_loss: bool,
}

/// The driver of a kind trained by gradients: a full-batch solver's iterations
/// (`optimizer = 'lbfgs' | 'owlqn'`) or mini-batch epochs.
pub async fn by_gradients(engine: &dyn Engine) -> Result<RecordBatch> {
    match engine.plan().spec.solver.method {
        Some(_) => crate::lbfgs::driver::train(engine).await,
        None => epochs::train(engine).await,
    }
}
