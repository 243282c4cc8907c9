//! [`TrainedRows`]: the rows each model's training tasks report as they train, summed, so a
//! job shows the progress of tasks running in other processes (Ballista executors) as they
//! go rather than when each epoch ends. Bounded: a job cannot grow the master without limit.

use std::collections::HashMap;

use angel_proto::{PsError, Result, TrainedRowsReply, TrainedRowsReport};
use parking_lot::Mutex;

use super::quota::namespace_of;

/// Models of one namespace whose totals are kept; one more forgets the namespace's model
/// updated longest ago (its job reads a fresh total at its next epoch, so at worst one epoch's
/// bar starts over), never another namespace's.
const MAX_MODELS: usize = 1_024;
/// Longest model name.
const MAX_NAME: usize = 256;

/// Each model's rows trained and their summed loss, with the report count at its last update.
#[derive(Debug, Default)]
pub struct TrainedRows {
    models: Mutex<HashMap<String, (TrainedRowsReply, u64)>>,
}

impl TrainedRows {
    /// Adds `report` (rows 0: a reader asking) to its model's totals and returns them.
    pub fn add(&self, report: &TrainedRowsReport) -> Result<TrainedRowsReply> {
        check(report)?;
        let mut models = self.models.lock();
        let order = models.values().map(|(_, n)| *n).max().unwrap_or(0) + 1;
        let namespace = namespace_of(&report.model);
        let ours: Vec<(&String, u64)> = (models.iter())
            .filter(|(m, _)| namespace_of(m) == namespace)
            .map(|(m, (_, n))| (m, *n))
            .collect();
        if !models.contains_key(&report.model) && ours.len() >= MAX_MODELS {
            let oldest = ours
                .iter()
                .min_by_key(|(_, n)| *n)
                .map(|(m, _)| (*m).clone());
            if let Some(model) = oldest {
                models.remove(&model);
            }
        }
        let (totals, last) = models.entry(report.model.clone()).or_default();
        totals.rows = totals.rows.saturating_add(report.rows);
        totals.loss += report.loss;
        *last = order;
        Ok(*totals)
    }
}

/// A report's name is bounded and its loss finite.
fn check(report: &TrainedRowsReport) -> Result<()> {
    if report.model.is_empty() || report.model.len() > MAX_NAME {
        return Err(PsError::InvalidArgument(format!(
            "trained rows report: model name of {} bytes; give 1 to {MAX_NAME}",
            report.model.len()
        )));
    }
    if !report.loss.is_finite() {
        return Err(PsError::InvalidArgument(format!(
            "trained rows report of model '{}': the loss is not a finite number",
            report.model
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(model: &str, rows: u64, loss: f64) -> TrainedRowsReport {
        TrainedRowsReport {
            model: model.into(),
            rows,
            loss,
        }
    }

    #[test]
    fn reports_add_up_per_model_and_a_reader_adds_nothing() {
        let trained = TrainedRows::default();
        trained.add(&report("m", 100, 50.0)).unwrap();
        trained.add(&report("other", 7, 1.0)).unwrap();
        trained.add(&report("m", 28, 4.0)).unwrap();
        let m = trained.add(&report("m", 0, 0.0)).unwrap();
        assert_eq!((m.rows, m.loss), (128, 54.0));
    }

    #[test]
    fn bad_reports_are_refused_and_models_are_bounded() {
        let trained = TrainedRows::default();
        assert!(trained.add(&report("", 1, 0.5)).is_err());
        assert!(trained.add(&report("m", 1, f64::INFINITY)).is_err());
        for m in 0..MAX_MODELS + 5 {
            trained.add(&report(&format!("m{m}"), 1, 0.5)).unwrap();
        }
        assert_eq!(trained.models.lock().len(), MAX_MODELS);
        let first = trained.add(&report("m0", 0, 0.0)).unwrap();
        assert_eq!(first.rows, 0, "the model updated longest ago was forgotten");
    }

    /// One team's flood of models forgets its own oldest, never another team's.
    #[test]
    fn a_namespace_evicts_only_its_own_models() {
        let trained = TrainedRows::default();
        trained.add(&report("team-a/m", 9, 1.0)).unwrap();
        for m in 0..MAX_MODELS + 5 {
            trained
                .add(&report(&format!("team-b/m{m}"), 1, 0.5))
                .unwrap();
        }
        let kept = trained.add(&report("team-a/m", 0, 0.0)).unwrap();
        assert_eq!(kept.rows, 9, "team a's progress survives team b's flood");
        let b_first = trained.add(&report("team-b/m0", 0, 0.0)).unwrap();
        assert_eq!(b_first.rows, 0, "team b's oldest went");
    }
}
