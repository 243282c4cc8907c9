//! What one job's functions report while it runs: rows trained with their losses (for the
//! progress bar of `CREATE MODEL`) and input rows skipped by the readers (for the end-of-job
//! summary). Each [`crate::job::Job`] owns one [`Reports`] and registers its functions with
//! it, so two jobs in one process, or two tests in one binary, never mix their reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use angel_etl::bad_rows::BadRows;

/// The reports of one job.
#[derive(Debug, Default, Clone)]
pub struct Reports {
    /// Rows `ps_train` has trained in this process for the job.
    pub progress: Arc<Progress>,
    /// Rows `read_csv` and `read_libsvm` skipped.
    pub bad_rows: Arc<BadRows>,
}

/// Rows trained and the sum of their losses, added to by `ps_train` tasks.
#[derive(Debug, Default)]
pub struct Progress {
    rows: AtomicU64,
    loss_bits: AtomicU64,
}

impl Progress {
    /// Records `rows` trained rows whose losses sum to `loss`.
    pub fn add(&self, rows: u64, loss: f64) {
        self.rows.fetch_add(rows, Ordering::Relaxed);
        let _ = self
            .loss_bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + loss).to_bits())
            });
    }

    /// (rows trained, sum of their losses) so far.
    pub fn snapshot(&self) -> (u64, f64) {
        (
            self.rows.load(Ordering::Relaxed),
            f64::from_bits(self.loss_bits.load(Ordering::Relaxed)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_jobs_keep_their_own_counts() {
        let (a, b) = (Reports::default(), Reports::default());
        a.progress.add(10, 2.5);
        a.progress.add(5, 0.5);
        b.progress.add(1, 1.0);
        assert_eq!(a.progress.snapshot(), (15, 3.0));
        assert_eq!(b.progress.snapshot(), (1, 1.0));
    }
}
