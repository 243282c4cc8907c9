//! What people watching a statement see: its progress bar (which its kind's driver makes),
//! moved by the rows `ps_train` reports in this process or at the master.

use std::time::Duration;

use angel_client::PsClient;
use datafusion::common::Result;
use indicatif::ProgressBar;

use crate::reports::Progress;

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
