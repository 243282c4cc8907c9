//! The driver half of a kind: what runs a `CREATE MODEL` or `TRAIN MODEL` statement between
//! and around its passes over the rows. A kind drives its statement
//! (the model interface's `Trains::drive`) on an `Engine`, which the SQL layer implements: the engine
//! runs passes of `ps_train` over the statement's rows and queries of its SQL; the driver does
//! the rest on the servers and answers the epoch table. No driver knows the engine, and the
//! engine knows no kind.
//!
//! - [`engine`]: what the engine's passes are told and answer, and the training query.
//! - [`plan`]: reading the options of a `Plan`, what the statement asks for (the spec,
//!   epochs, holdout).
//! - [`epochs`]: the default driver, a pass of mini-batch steps per epoch (a full-batch
//!   solver's is [`crate::lbfgs::driver`]).
//! - [`holdout`]: an epoch's holdout figures, scored by the model's SQL functions.
//! - [`progress`]: the progress bar and the epoch reports for the master's curves.
//! - [`traffic`]: the push traffic of a statement's matrices.
//! - [`epoch_table`]: the epoch table from its rows.
//! - [`answers`]: numbers read from a query's answer.

pub mod answers;
pub mod engine;
pub mod epoch_table;
pub mod epochs;
pub mod holdout;
pub mod plan;
pub mod progress;
pub mod traffic;
