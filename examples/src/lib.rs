//! Runnable angel-ps examples.
//!
//! - [`clip`]: a user-defined PS function, registered when the servers are built, with no
//!   change to server code. `tests/custom_psf.rs` calls it through the client.

pub mod clip;
