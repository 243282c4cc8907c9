//! Runnable angel-ps examples.
//!
//! - [`clip`]: a user-defined PS function, registered when the servers are built, with no
//!   change to server code. `tests/custom_psf.rs` calls it through the client.
//! - [`momentum`]: a user-defined optimizer (SGD with momentum), registered on the servers and
//!   selected from `CREATE MODEL`. `tests/custom_optimizer.rs` trains with it.
//! - [`row_partitioner`]: a user-defined partitioner, registered on the master.
//!   `tests/custom_partitioner.rs` creates a matrix with it.
//! - [`poisson`]: a user-defined model kind (Poisson regression), registered in the job's
//!   process and trained from `CREATE MODEL`. `tests/custom_kind.rs` trains, saves and loads it.

pub mod clip;
pub mod momentum;
pub mod poisson;
pub mod row_partitioner;
