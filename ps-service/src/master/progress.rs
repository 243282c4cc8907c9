//! [`Progress`]: the finished epochs of each model's training as its job reported them, kept
//! for the status page's curves. Bounded: a job cannot grow the master without limit.

use std::collections::BTreeMap;

use angel_proto::{EpochReport, PsError, Result, namespace};
use parking_lot::Mutex;

/// Models whose curves are kept; reporting one more drops the one reported to longest ago in
/// the namespace keeping the most, so a team reporting many models drops its own curves, not
/// another team's.
const MAX_MODELS: usize = 64;
/// Epochs kept per model (the first ones of a longer training are dropped): every status poll
/// of the page carries them all.
const MAX_EPOCHS: usize = 1_000;
/// Longest model name.
const MAX_NAME: usize = 256;

/// Each model's reported epochs, and when each model last reported.
#[derive(Debug, Default)]
pub struct Progress {
    models: Mutex<BTreeMap<String, Curve>>,
}

#[derive(Debug, Default)]
struct Curve {
    epochs: Vec<EpochReport>,
    /// Reports received by the master when this model last reported (orders eviction).
    last_report: u64,
}

impl Progress {
    /// Adds `report`. An epoch not after the model's last one starts a new training of it
    /// (`CREATE OR REPLACE MODEL`): the old curve goes.
    pub fn record(&self, report: EpochReport) -> Result<()> {
        check(&report)?;
        let mut models = self.models.lock();
        let order = models.values().map(|c| c.last_report).max().unwrap_or(0) + 1;
        if !models.contains_key(&report.model) && models.len() >= MAX_MODELS {
            let namespace = |name: &str| namespace::split(name).0.map(str::to_string);
            let mut kept: BTreeMap<Option<String>, usize> = BTreeMap::new();
            for name in models.keys() {
                *kept.entry(namespace(name)).or_default() += 1;
            }
            let fullest = kept.into_iter().max_by_key(|(_, n)| *n).map(|(ns, _)| ns);
            let oldest = models
                .iter()
                .filter(|(name, _)| Some(namespace(name)) == fullest)
                .min_by_key(|(_, c)| c.last_report)
                .map(|(name, _)| name.clone());
            if let Some(name) = oldest {
                models.remove(&name);
            }
        }
        let curve = models.entry(report.model.clone()).or_default();
        if curve.epochs.last().is_some_and(|e| e.epoch >= report.epoch) {
            curve.epochs.clear();
        }
        if curve.epochs.len() == MAX_EPOCHS {
            curve.epochs.remove(0);
        }
        curve.epochs.push(report);
        curve.last_report = order;
        Ok(())
    }

    /// Every kept epoch, by model then epoch.
    pub fn all(&self) -> Vec<EpochReport> {
        let models = self.models.lock();
        models.values().flat_map(|c| c.epochs.clone()).collect()
    }
}

/// A report's name is bounded and its numbers are finite.
fn check(report: &EpochReport) -> Result<()> {
    if report.model.is_empty() || report.model.len() > MAX_NAME {
        return Err(PsError::InvalidArgument(format!(
            "epoch report: model name of {} bytes; give 1 to {MAX_NAME}",
            report.model.len()
        )));
    }
    let values = [
        report.train_loss,
        report.holdout_loss,
        report.holdout_auc,
        report.holdout_accuracy,
    ];
    if values
        .into_iter()
        .flatten()
        .chain([report.seconds])
        .any(|v| !v.is_finite())
    {
        return Err(PsError::InvalidArgument(format!(
            "epoch report of model '{}', epoch {}: a loss, AUC, accuracy or time is not a finite number",
            report.model, report.epoch
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(model: &str, epoch: u32, loss: f64) -> EpochReport {
        EpochReport {
            model: model.into(),
            epoch,
            train_loss: Some(loss),
            ..Default::default()
        }
    }

    #[test]
    fn epochs_accumulate_and_a_new_training_starts_a_new_curve() {
        let progress = Progress::default();
        for (e, loss) in [(1, 0.5), (2, 0.4), (3, 0.3)] {
            progress.record(epoch("m", e, loss)).unwrap();
        }
        progress.record(epoch("other", 1, 0.9)).unwrap();
        assert_eq!(progress.all().len(), 4);
        progress.record(epoch("m", 1, 0.6)).unwrap();
        let m: Vec<_> = progress
            .all()
            .into_iter()
            .filter(|e| e.model == "m")
            .collect();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].train_loss, Some(0.6));
    }

    #[test]
    fn bad_reports_are_refused_and_models_are_bounded() {
        let progress = Progress::default();
        assert!(progress.record(epoch("", 1, 0.5)).is_err());
        assert!(progress.record(epoch("m", 1, f64::NAN)).is_err());
        for m in 0..MAX_MODELS + 5 {
            progress.record(epoch(&format!("m{m}"), 1, 0.5)).unwrap();
        }
        let kept: Vec<String> = progress.all().into_iter().map(|e| e.model).collect();
        assert_eq!(kept.len(), MAX_MODELS);
        assert!(
            !kept.contains(&"m0".to_string()),
            "the oldest model goes first"
        );
        assert!(kept.contains(&format!("m{}", MAX_MODELS + 4)));
    }

    #[test]
    fn a_team_reporting_many_models_drops_its_own_curves() {
        let progress = Progress::default();
        progress.record(epoch("quiet/model", 1, 0.5)).unwrap();
        for m in 0..MAX_MODELS * 2 {
            progress
                .record(epoch(&format!("busy/m{m}"), 1, 0.5))
                .unwrap();
        }
        let kept: Vec<String> = progress.all().into_iter().map(|e| e.model).collect();
        assert_eq!(kept.len(), MAX_MODELS);
        assert!(kept.contains(&"quiet/model".to_string()), "{kept:?}");
    }
}
