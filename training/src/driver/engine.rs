//! What a pass of the engine is told and answers ([`Watch`], [`Passed`]), and the
//! statement's [`TrainingQuery`]: the plain types of the driver's interface, the
//! `Engine` (in `model/`).

use indicatif::ProgressBar;

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
