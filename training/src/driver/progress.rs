//! What people watching a statement see: the progress bar, and each epoch's figures reported
//! to the master for the status page's curves.

use angel_client::{EpochReport, PsClient};
use indicatif::{ProgressBar, ProgressStyle};

use super::holdout::Holdout;
use crate::error::Result;
use crate::model::Plan;

/// Reports epoch `epoch` of model `name` to the master, for the status page's curves: its
/// (rows, training loss, seconds) and holdout figures (a diverged epoch's NaN loss as
/// missing); then fails the statement if the training diverged, as `plan` says
/// ([`Plan::check_finite`]).
pub async fn report(
    (client, plan): (&PsClient, &Plan),
    (name, epoch): (&str, usize),
    (rows, train_loss, seconds): (u64, Option<f64>, f64),
    holdout: &Holdout,
) -> Result<()> {
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
    let figures = [("train_loss", train_loss), ("holdout_loss", holdout.loss)];
    plan.check_finite((name, epoch), &figures)
}

/// A progress bar of `total` `unit`s (rows, trees, iterations, tokens).
pub fn bar(total: u64, unit: &str) -> ProgressBar {
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
