//! The registry of model kinds: [`KINDS`], every kind of this crate by the names
//! `kind = '...'` selects it with, and the kinds a program adds at run time ([`register`]),
//! such as its own kind (`examples/src/poisson.rs`). It sits above the kinds: no kind names
//! another, or the registry.

use std::sync::RwLock;

use crate::error::{Result, option_err};
use crate::kinds::linear::Linear;
use crate::kinds::{fm, gbdt, kmeans, lda, mf, softmax};
use crate::model::{Kind, ModelKind};

/// Makes a kind with its default options.
pub type Make = fn() -> Box<dyn ModelKind>;

/// Every kind, by the names that select it (the first is the one stored).
pub const KINDS: &[(&[&str], Make)] = &[
    (&["logistic", "lr"], || Box::new(Linear::Logistic)),
    (&["linear", "regression"], || Box::new(Linear::Regression)),
    (&["svm", "hinge"], || Box::new(Linear::Svm)),
    (&["softmax", "multinomial"], || {
        Box::new(softmax::Softmax::default())
    }),
    (&["fm", "factorization_machine"], || {
        Box::new(fm::Fm::default())
    }),
    (&["mf", "matrix_factorization"], || {
        Box::new(mf::Mf::default())
    }),
    (&["lda", "topics"], || Box::new(lda::Lda::default())),
    (&["gbdt", "gbm", "boosted_trees"], || {
        Box::new(gbdt::Gbdt::default())
    }),
    (&["kmeans", "k-means"], || {
        Box::new(kmeans::KMeans::default())
    }),
];

/// Kinds registered at run time, after [`KINDS`].
static REGISTERED: RwLock<Vec<(&'static [&'static str], Make)>> = RwLock::new(Vec::new());

/// Adds a kind, selected by `names` (the first is the one stored), to every later
/// `CREATE MODEL`, `LOAD MODEL` and model function of this process. Every process that
/// opens its models must register it: the job's, and a Ballista executor's. Refuses a name
/// another kind has.
pub fn register(names: &'static [&'static str], make: Make) -> Result<()> {
    let mut registered = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    let taken = |n: &&&str| {
        let n = n.to_ascii_lowercase();
        let mut all = KINDS.iter().chain(registered.iter());
        all.any(|(names, _)| names.contains(&n.as_str()))
    };
    if let Some(name) = names.iter().find(taken) {
        return option_err(format!("model kind '{name}' is already registered"));
    }
    if names.is_empty() || names.iter().any(|n| *n != n.to_ascii_lowercase()) {
        return option_err(format!(
            "a kind is registered by one or more lowercase names, got {names:?}"
        ));
    }
    registered.push((names, make));
    Ok(())
}

/// The kind named `name` (any case), with its default options.
pub fn by_name(name: &str) -> Result<Kind> {
    let name = name.trim().to_ascii_lowercase();
    let registered = REGISTERED.read().unwrap_or_else(|e| e.into_inner());
    let mut all = KINDS.iter().chain(registered.iter());
    match all.find(|(names, _)| names.contains(&name.as_str())) {
        Some((_, make)) => Ok(Kind::from_box(make())),
        None => {
            let all = KINDS.iter().chain(registered.iter());
            let known: Vec<&str> = all.map(|(names, _)| names[0]).collect();
            option_err(format!(
                "unknown model kind '{name}' (expected {})",
                known.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::OptionValue;

    /// Each kind's derivatives against central differences of its loss.
    #[test]
    fn every_kind_has_the_derivatives_of_its_loss() {
        for (names, make) in KINDS {
            let mut kind = make();
            kind.set(&OptionValue {
                key: "classes",
                value: "3",
            })
            .unwrap();
            let k = kind.outputs();
            let Some(kind) = kind.gradient() else {
                continue;
            };
            for (label, base) in [(1.0, 0.3), (0.0, -1.7), (2.0, 2.5), (1.0, -0.2)] {
                let margins: Vec<f64> = (0..k).map(|o| base * (o as f64 + 1.0) - 0.4).collect();
                let mut d = vec![0.0; k];
                kind.loss(label, &margins, &mut d);
                for o in 0..k {
                    let h = 1e-6;
                    let at = |delta: f64| {
                        let mut m = margins.clone();
                        m[o] += delta;
                        kind.loss(label, &m, &mut vec![0.0; k])
                    };
                    let numeric = (at(h) - at(-h)) / (2.0 * h);
                    assert!(
                        (d[o] - numeric).abs() < 1e-4,
                        "{}: y={label} output {o}: {} vs {numeric}",
                        names[0],
                        d[o]
                    );
                }
            }
        }
    }

    #[test]
    fn kinds_are_found_by_any_of_their_names() {
        assert_eq!(by_name(" LR ").unwrap().name(), "logistic");
        assert_eq!(by_name("multinomial").unwrap().name(), "softmax");
        let err = by_name("forest").unwrap_err().to_string();
        assert!(err.contains("'forest'") && err.contains("softmax"), "{err}");
    }
}
