//! Softmax (multinomial logistic) regression, Angel's multi-class model: one row of weights
//! and an intercept per class, so a row has one margin per class; the model predicts the class
//! of the largest margin and minimises the cross-entropy of the classes' probabilities
//! `softmax(margins)`. Labels are the classes `0..classes-1`.

use crate::error::{Result, option_err};
use crate::kinds::{Gradient, Metric};
use crate::model::ModelKind;
use crate::options::OptionValue;

/// Most classes a softmax model may have: every mini-batch pulls and pushes one row of weights
/// per class.
pub const MAX_CLASSES: u64 = 1 << 16;

/// See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Softmax {
    /// Number of classes (option `classes`); 0 until set.
    classes: usize,
}

impl ModelKind for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }

    fn loss_name(&self) -> &'static str {
        "cross-entropy"
    }

    fn set(&mut self, option: &OptionValue) -> Result<bool> {
        if !option.key.eq_ignore_ascii_case("classes") {
            return Ok(false);
        }
        self.classes = option.whole(2, MAX_CLASSES)? as usize;
        Ok(true)
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        vec![("classes", self.classes.to_string())]
    }

    fn check(&self) -> Result<()> {
        match self.classes {
            0 => option_err(
                "a softmax model needs the option classes (the number of classes; labels are \
                 0 to classes - 1)",
            ),
            _ => Ok(()),
        }
    }

    fn outputs(&self) -> usize {
        self.classes
    }

    fn full_batch(&self) -> bool {
        true
    }
}

impl Gradient for Softmax {
    fn refuse_label(&self, label: f64) -> Option<String> {
        let class = label.fract() == 0.0 && (0.0..self.classes as f64).contains(&label);
        (!class).then(|| {
            format!(
                "the label is {label}, not a class of this softmax model (whole numbers from 0 \
                 to {})",
                self.classes - 1
            )
        })
    }

    fn loss(&self, label: f64, margins: &[f64], d: &mut [f64]) -> f64 {
        let top = margins.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut sum = 0.0;
        for (d, m) in d.iter_mut().zip(margins) {
            *d = (m - top).exp();
            sum += *d;
        }
        let y = label as usize;
        for d in d.iter_mut() {
            *d /= sum;
        }
        d[y] -= 1.0;
        // -log p_y = log(sum e^m) - m_y, shifted by the largest margin against overflow.
        sum.ln() + top - margins[y]
    }

    fn predict(&self, margins: &[f64]) -> f64 {
        let best = (0..margins.len()).fold(0, |b, c| if margins[c] > margins[b] { c } else { b });
        best as f64
    }

    fn probabilities(&self, margins: &[f64]) -> Option<Vec<f64>> {
        let mut p = vec![0.0; margins.len()];
        // The derivative at class 0 is the probabilities with 1 taken from class 0.
        self.loss(0.0, margins, &mut p);
        p[0] += 1.0;
        Some(p)
    }

    fn metrics(&self) -> &'static [Metric] {
        &[Metric::Accuracy]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Softmax {
        Softmax { classes: 3 }
    }

    #[test]
    fn probabilities_and_loss_follow_the_closed_form() {
        let margins = [1.0, 2.0, 0.5];
        let z: f64 = margins.iter().map(|m: &f64| m.exp()).sum();
        let p = three().probabilities(&margins).unwrap();
        for c in 0..3 {
            assert!((p[c] - margins[c].exp() / z).abs() < 1e-12);
        }
        let loss = three().loss(2.0, &margins, &mut [0.0; 3]);
        assert!((loss - (z.ln() - 0.5)).abs() < 1e-12);
        assert_eq!(three().predict(&margins), 1.0);
        let huge = three().loss(0.0, &[1000.0, -1000.0, 0.0], &mut [0.0; 3]);
        assert!(huge.is_finite() && huge.abs() < 1e-9, "{huge}");
    }

    #[test]
    fn classes_are_required_and_labels_must_be_classes() {
        let mut s = Softmax::default();
        assert!(s.check().unwrap_err().to_string().contains("classes"));
        let option = |value| OptionValue {
            key: "classes",
            value,
        };
        assert!(s.set(&option("1")).is_err());
        assert!(s.set(&option("3")).unwrap());
        assert!(s.check().is_ok());
        assert!(s.refuse_label(2.0).is_none());
        for bad in [3.0, -1.0, 0.5] {
            let why = s.refuse_label(bad).unwrap();
            assert!(why.contains("0 to 2"), "{why}");
        }
    }
}
