//! What people watching a statement see: the progress bar, moved by the rows `ps_train`
//! reports in this process or at the master, and each epoch's figures reported to the master
//! for the status page's curves.

use std::time::Duration;

use angel_client::{EpochReport, PsClient};
use datafusion::common::Result;
use indicatif::{ProgressBar, ProgressStyle};

use super::holdout::Holdout;
use crate::reports::Progress;

/// Reports epoch `epoch` of model `name` to the master, for the status page's curves: its
/// (rows, training loss, seconds) and holdout figures. A diverged epoch's NaN loss is
/// reported as missing.
pub(super) async fn report(
    client: &PsClient,
    (name, epoch): (&str, usize),
    (rows, train_loss, seconds): (u64, Option<f64>, f64),
    holdout: &Holdout,
) {
    let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
    let report = EpochReport {
        model: name.to_string(),
        epoch: epoch as u32,
        rows,
        train_loss: finite(train_loss),
        holdout_loss: finite(holdout.loss),
        holdout_auc: finite(holdout.auc),
        holdout_accuracy: finite(holdout.accuracy),
        seconds,
    };
    // The curves are for people watching; training goes on without them.
    if let Err(e) = client.report_epoch(report).await {
        tracing::warn!(
            model = name,
            epoch,
            "the master did not take the epoch report: {e}"
        );
    }
}

/// A progress bar of `total` `unit`s (rows, trees, iterations, tokens).
pub(super) fn bar(total: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{msg}} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit}, {{per_sec}}, ETA {{eta}}"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

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
