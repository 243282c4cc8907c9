//! A model read back from its matrix: its [`ModelSpec`] from the typed training description
//! stored with the matrix (its kind by name, through [`crate::registry`]), and the opened
//! [`Model`] a task trains and predicts with.

use std::sync::Arc;

use angel_client::runtime::block_on;
use angel_client::{MatrixMeta, PsClient, Training};
use angel_optim::rule;

use super::{Model, ModelSpec};
use crate::error::{Result, input_err};
use crate::lbfgs::solver::Solver;
use crate::registry;
use crate::sync;

impl ModelSpec {
    /// Reads a spec back from model `model`'s training description, its kind by name, every
    /// option checked as `CREATE MODEL` checks it ([`ModelSpec::with_training`]).
    pub fn from_training(model: &str, training: &Training) -> Result<Self> {
        let not_a_model = || {
            input_err(format!(
                "matrix '{model}' is not a model (its training description names no kind or \
                 no optimizer)"
            ))
        };
        if training.kind.is_empty() {
            return not_a_model();
        }
        let spec = ModelSpec::with_training(registry::by_name(&training.kind)?, training)?;
        match spec.kind.gradient().is_none() || training.optimizer.is_some() {
            true => Ok(spec),
            false => not_a_model(),
        }
    }

    /// The spec of model `name`, from its matrix's training description.
    pub fn of_matrix(name: &str, meta: &MatrixMeta) -> Result<Self> {
        match &meta.training {
            Some(training) => Self::from_training(name, training),
            None => input_err(format!(
                "matrix '{name}' is not a model (it has no training description)"
            )),
        }
    }

    /// Every option as `key = value` text, as `CREATE MODEL` takes them: what a saved model
    /// keeps.
    pub fn to_options(&self) -> Vec<(String, String)> {
        options(&self.to_training())
    }

    /// Reads a spec from `key = value` options (the model's kind among them).
    pub fn from_options(model: &str, options: &[(String, String)]) -> Result<Self> {
        let Some((_, kind)) = options.iter().find(|(k, _)| k == "kind") else {
            return input_err(format!("model '{model}' has no 'kind' option"));
        };
        let mut spec = ModelSpec::new(registry::by_name(kind)?, 0);
        for (k, v) in options {
            spec.set(k, v)?;
        }
        Ok(spec)
    }
}

impl Model {
    /// Opens model `name` with `client` (of the service, in the job's namespace), reading its
    /// spec from the matrix. The process's map is refreshed first: a model replaced (`CREATE
    /// OR REPLACE MODEL`) since this process last used it is a new matrix, which a cached map
    /// would not know.
    pub fn open(client: Arc<PsClient>, name: &str) -> Result<Self> {
        block_on(client.refresh())?;
        let matrix = block_on(client.matrix(name))?;
        let spec = ModelSpec::of_matrix(name, &matrix.meta)?;
        let outputs = spec.kind.weight_rows() as u64;
        let group = matrix.meta.rows / outputs.max(1);
        if group == 0 || group * outputs != matrix.meta.rows {
            return input_err(format!(
                "matrix '{name}' has {} rows, not a group of rows per weight row of its \
                 {outputs} weight rows",
                matrix.meta.rows
            ));
        }
        if rule::of(spec.sync.rule).averages() {
            let local = spec.local_optimizer()?;
            if local.state_rows() as u64 + 1 != group {
                return input_err(format!(
                    "model '{name}' keeps {} state rows per output, but the workers' optimizer \
                     '{}' keeps {}: the servers run another optimizer of that name, which model \
                     averaging cannot train with",
                    group - 1,
                    local.name(),
                    local.state_rows()
                ));
            }
        }
        Ok(Model {
            name: name.to_string(),
            rows: (0..outputs).map(|o| o * group).collect(),
            group,
            spec,
            client,
        })
    }
}

/// The options of training description `t` as `key = value` text, as `CREATE MODEL` takes
/// them, the kind first.
fn options(t: &Training) -> Vec<(String, String)> {
    let mut text = vec![
        ("kind", t.kind.clone()),
        ("dim", t.dim.to_string()),
        ("batch_size", t.batch_size.to_string()),
    ];
    if !t.counter.is_empty() {
        text.push(("counter", t.counter.clone()));
    }
    if let Some(u) = &t.optimizer {
        text.extend([
            ("optimizer", u.name.clone()),
            ("learning_rate", u.learning_rate.to_string()),
            ("l1", u.l1.to_string()),
            ("l2", u.l2.to_string()),
            ("beta1", u.beta1.to_string()),
            ("beta2", u.beta2.to_string()),
            ("epsilon", u.epsilon.to_string()),
            ("beta", u.beta.to_string()),
        ]);
    }
    for (key, value) in [
        ("compression", &t.compression),
        ("compression_mode", &t.compression_mode),
    ] {
        if !value.is_empty() {
            text.push((key, value.clone()));
        }
    }
    let sync = t.sync.unwrap_or_default();
    text.extend(sync::options(&sync, t.update(), t.local_steps));
    // After the optimizer's: `optimizer = 'lbfgs'` replaces the plain SGD stored.
    if let Some(solver) = &t.solver {
        text.extend(Solver::options(solver));
    }
    let mut text: Vec<(String, String)> =
        text.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let mut own: Vec<_> = t.kind_options.clone().into_iter().collect();
    own.sort();
    // A kind's option of a generic option's name (the topic model's beta) is the kind's.
    text.retain(|(k, _)| !own.iter().any(|(o, _)| o == k));
    text.extend(own);
    text
}
