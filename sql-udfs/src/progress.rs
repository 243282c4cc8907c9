//! Training progress of this process, which `ps_train` tasks add to and the job's progress
//! bar reads: rows trained and the sum of their losses.

use std::sync::atomic::{AtomicU64, Ordering};

static ROWS: AtomicU64 = AtomicU64::new(0);
static LOSS_BITS: AtomicU64 = AtomicU64::new(0);

/// Records `rows` trained rows whose losses sum to `loss`.
pub fn add(rows: u64, loss: f64) {
    ROWS.fetch_add(rows, Ordering::Relaxed);
    let _ = LOSS_BITS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
        Some((f64::from_bits(bits) + loss).to_bits())
    });
}

/// (rows trained, sum of their losses) since the process started.
pub fn snapshot() -> (u64, f64) {
    (
        ROWS.load(Ordering::Relaxed),
        f64::from_bits(LOSS_BITS.load(Ordering::Relaxed)),
    )
}
