//! Training on the angel-ps parameter servers, below any SQL engine: what a model is, how a
//! task trains it over rows, how its workers keep in step. The SQL functions (`angel-sql`)
//! are thin bindings over it.
//!
//! # Layout
//!
//! - [`model`]: the model interface, [`ModelKind`] and [`Trains`], and the types that name it
//!   back: [`ModelSpec`] (kind, optimizer, dimension, sync options), stored with the model's
//!   matrix as its typed training description; [`Model`], a model opened by a task (pull,
//!   push, gradients, predictions); a statement's [`Plan`] and its driver's [`Engine`].
//!   [`options`]: reading one option, with errors naming it.
//! - [`kinds`]: the kinds of model, one folder each, and what they implement beside the
//!   interface ([`kinds::Gradient`]); [`registry`]: the kinds by name, above them.
//! - [`gradient`]: what a kind trained by gradients is given (its passes, its driver, its
//!   saved format); [`linear_loss`]: the losses of a margin the linear kinds, the
//!   factorization machines and the boosted trees share.
//! - [`rows`]: the rows a model trains on or predicts, as a sparse design matrix cut into
//!   mini-batches; [`key_lists`]: mini-batches kept across epochs (Angel's key-list caching).
//! - [`task_pass`]: [`TaskPass`], a task's part of a training pass, the one interface
//!   `ps_train` drives whatever the kind; [`task`]: [`TrainTask`], mini-batch steps;
//!   [`rotation`]: [`RotationTask`], one worker of model rotation (Harp's); [`kept`]: what a
//!   statement's workers keep from round to round.
//! - [`driver`]: the driver half of a kind, what runs its statement between its passes, on
//!   an [`Engine`] the SQL layer implements.
//! - [`saved`]: a kind's saved format, the tables a saved model holds (the files are the SQL
//!   layer's).
//! - [`recommend`]: the top-k items of a matrix factorization model for users.
//! - [`lbfgs`]: full-batch L-BFGS and OWL-QN: a task's summed gradient, the history and the
//!   line search the job drives on the servers.
//! - [`update`]: the workers' side of the update rules (SGD, ConSGD, DynSGD, model averaging;
//!   the rules themselves are `angel-optim`'s).
//! - [`sync`]: [`SyncSpec`], the consistency model (BSP, SSP, ASP) and its clock, and
//!   [`sync::worker`], a task in its model's clock table on the master.
//! - [`error`]: [`Error`], telling a wrong option from wrong rows and a failed service.

pub mod driver;
pub mod error;
pub mod gradient;
pub mod kept;
pub mod key_lists;
pub mod kinds;
pub mod lbfgs;
pub mod linear_loss;
pub mod model;
pub mod options;
pub mod recommend;
pub mod registry;
pub mod rotation;
pub mod rows;
pub mod saved;
pub mod sync;
pub mod task;
pub mod task_pass;
pub mod update;

pub use error::{Error, Result};
pub use model::{Engine, Kind, Model, ModelKind, ModelSpec, Plan, Trains};
pub use rotation::RotationTask;
pub use sync::SyncSpec;
pub use task::TrainTask;
pub use task_pass::{TaskContext, TaskPass, Trained};
