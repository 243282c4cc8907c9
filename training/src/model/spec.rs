//! Reading and checking a [`ModelSpec`]'s options (`CREATE MODEL ... OPTIONS`), its
//! training description, and creating its matrix on the service.

use std::fmt::Display;
use std::str::FromStr;
use std::sync::Arc;

use angel_client::matrix::Matrix;
use angel_client::{
    Compression, CompressionMode, MatrixSpec, OptimizerParams, PsClient, Training, optimizer_params,
};
use angel_optim::{Optimizer, builtin, rule};
use arrow::array::ArrayRef;

use super::{Kind, MAX_DENSE_DIM, ModelSpec};
use crate::error::{Result, input_err, option_err};
use crate::kinds::Gradient;
use crate::lbfgs::history;
use crate::lbfgs::solver::{Method, Solver};
use crate::options::OptionValue;
use crate::rows::MiniBatches;
use crate::sync::{StepBudget, SyncSpec};

impl ModelSpec {
    /// A spec with the defaults for `kind` over `dim` features: Adam, rate 0.01, mini-batches
    /// of 256 rows, no regularisation.
    pub fn new(kind: Kind, dim: u64) -> Self {
        ModelSpec {
            kind,
            dim,
            optimizer: optimizer_params("adam", 0.01),
            batch_size: 256,
            counter: None,
            compression: Compression::None,
            compression_mode: CompressionMode::Auto,
            sync: SyncSpec::default(),
            solver: Solver::default(),
        }
    }

    /// Sets an option by name (the `CREATE MODEL ... OPTIONS` keys), refusing a value outside
    /// the option's range with an error naming the option, the value and what is allowed.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let option = OptionValue { key, value };
        let key = &key.to_ascii_lowercase();
        if self.sync.set(key, value)? {
            return Ok(());
        }
        if key == "kind" {
            // The kind is chosen first, by name (the registry): its options follow.
            return match value.trim().eq_ignore_ascii_case(self.kind.name()) {
                true => Ok(()),
                false => option_err(format!(
                    "model option kind = '{value}' comes after kind = '{}': a model has one kind",
                    self.kind.name()
                )),
            };
        }
        // The kind's own options first: the topic model's alpha and beta are its priors,
        // k-means's tolerance is not the full-batch solvers'.
        if self.kind.set(&option)? {
            if let Some(dim) = self.kind.dim() {
                self.dim = dim;
            }
            return Ok(());
        }
        if self.solver.set(&option)? {
            return Ok(());
        }
        let optimizer_option = key == "optimizer" || ModelSpec::setting(key) != key.as_str();
        let hyper = HYPER.iter().any(|h| h.name == key);
        if (optimizer_option || hyper) && self.kind.gradient().is_none() {
            return option_err(format!(
                "model option '{key}' does not apply to a {} model: it trains without an \
                 optimizer",
                self.kind.name()
            ));
        }
        let u = &mut self.optimizer;
        match key.as_str() {
            "dim" => self.dim = option.whole(1, MAX_DIM)?,
            "optimizer" => {
                let name = value.trim().to_ascii_lowercase();
                self.solver.method = Method::named(&name);
                // What the servers would apply to a push to a full-batch model: plain steps.
                u.name = match self.solver.method {
                    Some(_) => "sgd".to_string(),
                    None => name,
                };
            }
            "batch_size" => self.batch_size = option.whole(1, MAX_BATCH as u64)? as usize,
            "counter" => self.counter = Some(value.to_string()).filter(|c| !c.is_empty()),
            "compression" => self.compression = option.parsed()?,
            "compression_mode" => self.compression_mode = option.parsed()?,
            name => match HYPER
                .iter()
                .find(|h| h.name == name || h.aliases.contains(&name))
            {
                Some(h) => *h.field(u) = h.read(&option)?,
                None => return option_err(format!("unknown model option '{key}'")),
            },
        }
        if let Some(dim) = self.kind.dim() {
            self.dim = dim;
        }
        Ok(())
    }

    /// The optimizer hyper-parameter option `key` (lowercase) names by an alias (`lr` and
    /// `alpha` name `learning_rate`), else `key`: two options given together must not set one
    /// thing.
    pub fn setting(key: &str) -> &str {
        (HYPER.iter())
            .find(|h| h.aliases.contains(&key))
            .map_or(key, |h| h.name)
    }

    /// A spec of `kind` read from training description `t`, every option checked as
    /// `CREATE MODEL` checks it: the typed fields directly, the kind's own options (text, as
    /// written) by the kind.
    pub fn with_training(kind: Kind, t: &Training) -> Result<Self> {
        let mut spec = ModelSpec::new(kind, 0);
        let mut own: Vec<_> = t.kind_options.iter().collect();
        own.sort();
        for (key, value) in own {
            if !spec.kind.set(&OptionValue::typed(key, value))? {
                return option_err(format!(
                    "unknown model option '{key}' of a {} model",
                    spec.kind.name()
                ));
            }
        }
        let whole = |key, n: u64, max| OptionValue::typed(key, &n.to_string()).whole(1, max);
        spec.dim = whole("dim", t.dim, MAX_DIM)?;
        spec.batch_size = whole("batch_size", t.batch_size, MAX_BATCH as u64)? as usize;
        spec.counter = Some(t.counter.clone()).filter(|c| !c.is_empty());
        if let Some(u) = &t.optimizer {
            spec.optimizer = u.clone();
            for h in &HYPER {
                let x = *h.field(&mut spec.optimizer);
                *h.field(&mut spec.optimizer) =
                    h.read(&OptionValue::typed(h.name, &x.to_string()))?;
            }
        }
        spec.compression = parsed_or("compression", &t.compression, Compression::None)?;
        spec.compression_mode = parsed_or(
            "compression_mode",
            &t.compression_mode,
            CompressionMode::Auto,
        )?;
        spec.sync = SyncSpec::from_proto(&t.sync.unwrap_or_default(), t.update, t.local_steps)?;
        spec.solver = Solver::from_proto(t.solver.as_ref())?;
        if let Some(dim) = spec.kind.dim() {
            spec.dim = dim;
        }
        Ok(spec)
    }

    /// The model's training description, stored with its matrix.
    pub fn to_training(&self) -> Training {
        Training {
            kind: self.kind.name().to_string(),
            kind_options: (self.kind.options().into_iter())
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            dim: self.dim,
            batch_size: self.batch_size as u64,
            counter: self.counter.clone().unwrap_or_default(),
            // The servers apply it to gradient pushes; a kind without gradients has none.
            optimizer: self.kind.gradient().map(|_| self.optimizer.clone()),
            sync: Some(self.sync.to_proto()),
            update: self.sync.rule as i32,
            local_steps: self.sync.local_steps,
            compression: self.compression.to_string(),
            compression_mode: self.compression_mode.to_string(),
            solver: self.solver.to_proto(),
        }
    }

    /// Creates the model's matrix on the service, with the rows of state the servers report
    /// for its optimizer (built-in or registered by a user on the servers).
    pub async fn create(&self, client: &PsClient, name: &str) -> Result<Arc<Matrix>> {
        if self.kind.random_rows().is_some() && self.dim >= MAX_DENSE_DIM {
            return option_err(format!(
                "model '{name}': a {} model's factors start at random, which the servers draw \
                 only in dense storage, and dim = {} is past the {MAX_DENSE_DIM} columns (2^26) \
                 kept dense; hash the features into fewer columns (a smaller dim)",
                self.kind.name(),
                self.dim
            ));
        }
        // A kind without gradients (the topic model's counts) keeps no optimizer state; a
        // full-batch model keeps its history.
        let state_rows = match (self.kind.gradient(), self.solver.method) {
            (Some(_), Some(_)) => history::state_rows(self.solver.memory) as u32,
            (Some(_), None) => client.optimizer(&self.optimizer.name).await?.state_rows,
            (None, _) => 0,
        };
        let spec = self.matrix(name, state_rows)?;
        Ok(client.create_matrix(spec).await?)
    }

    /// Draws the weight rows its kind starts at random (matrix factorization's factors) on
    /// the servers, from `seed`; the others start at zero.
    pub async fn randomize(&self, client: &PsClient, name: &str, seed: u64) -> Result<()> {
        let Some((rows, std_dev)) = self.kind.random_rows() else {
            return Ok(());
        };
        let group = client.matrix(name).await?.meta.rows / self.kind.weight_rows() as u64;
        for row in rows {
            let at = row as u64 * group;
            // The servers draw each row from its own stream of the seed.
            let args = [0.0, std_dev, seed as f64];
            client.psf("random_normal", &[(name, at)], &args).await?;
        }
        Ok(())
    }

    /// The optimizer workers apply to their local model under model averaging: a built-in
    /// one (a user's optimizer runs only on the servers where it is registered).
    pub fn local_optimizer(&self) -> Result<&'static dyn Optimizer> {
        let name = &self.optimizer.name;
        builtin::by_name(name).map_or_else(
            || {
                option_err(format!(
                    "model option update = 'average' trains local rounds with the model's \
                     optimizer on the workers, and optimizer '{name}' runs only on the servers \
                     (the workers have sgd, adagrad, adam and ftrl)"
                ))
            },
            Ok,
        )
    }

    /// Refuses what model rotation cannot train: a kind with nothing to rotate, another
    /// optimizer than the workers' plain SGD, another update rule.
    fn check_rotation(&self) -> Result<()> {
        let kind = self.kind.name();
        if self.kind.optimizer_free() {
            return Ok(());
        }
        if self.kind.rotating().is_none() {
            return option_err(format!(
                "model option parallelism = 'rotation' is for kinds with a part to rotate \
                 (mf, lda); a {kind} model trains with parallelism = 'data'"
            ));
        }
        if self.optimizer.name != "sgd" || self.sync.rule != angel_client::UpdateRule::Sgd {
            return option_err(format!(
                "model option parallelism = 'rotation' trains with plain SGD on the workers \
                 (Harp's): it needs optimizer = 'sgd' and update = 'sgd', not optimizer = \
                 '{}', update = '{}'",
                self.optimizer.name,
                rule::name(self.sync.rule)
            ));
        }
        Ok(())
    }

    /// Refuses what a full-batch solver cannot train: a kind whose loss is not smooth and
    /// convex in its weights, mini-batch options, an L1 penalty without OWL-QN.
    fn check_solver(&self) -> Result<()> {
        self.solver.check(&self.optimizer.name)?;
        let Some(method) = self.solver.method else {
            return Ok(());
        };
        let (kind, name) = (self.kind.name(), method.name());
        if !self.kind.full_batch() {
            return option_err(format!(
                "optimizer = '{name}' trains logistic, linear and softmax models (a smooth \
                 convex loss), not a {kind} model"
            ));
        }
        if self.sync.rotation || rule::of(self.sync.rule).averages() {
            return option_err(format!(
                "optimizer = '{name}' computes full gradients and moves the weights on the \
                 servers: it takes no parallelism = 'rotation' or update = 'average'"
            ));
        }
        if self.optimizer.l1 > 0.0 && method == Method::Lbfgs {
            return option_err(
                "an l1 penalty is not smooth, which L-BFGS needs: use optimizer = 'owlqn'",
            );
        }
        Ok(())
    }

    /// The matrix holding the model: per output, weights and intercept in one row, then
    /// `state_rows` rows of optimizer state; every row together in each block.
    fn matrix(&self, name: &str, state_rows: u32) -> Result<MatrixSpec> {
        if self.dim == 0 || self.dim > MAX_DIM {
            return option_err(format!(
                "model '{name}': dim must be from 1 to {MAX_DIM}, got {}",
                self.dim
            ));
        }
        self.kind.check()?;
        self.check_solver()?;
        if rule::of(self.sync.rule).averages() {
            self.local_optimizer()?;
        }
        match (self.sync.rotation, self.sync.step_budget) {
            (true, _) => self.check_rotation()?,
            (false, StepBudget::None) => {}
            (false, _) => {
                return option_err(
                    "model option step_ms is model rotation's time control: it needs \
                     parallelism = 'rotation'",
                );
            }
        }
        let rows = self.kind.weight_rows() as u64 * (1 + u64::from(state_rows));
        let spec = self.kind.matrix(name, rows, self.dim)?;
        Ok(spec.block_shape(rows, 0).training(self.to_training()))
    }

    /// The rows of a batch (the `label` and `inputs` arrays of `function`'s arguments, as
    /// the kind reads them), checked against model `name` and cut into its mini-batches.
    pub fn mini_batches(
        &self,
        function: &str,
        name: &str,
        (label, inputs): (&ArrayRef, &[ArrayRef]),
    ) -> Result<MiniBatches> {
        let gradient = self.gradient(function, name)?;
        let rows = gradient.read_rows(function, Some(label), inputs)?;
        rows.check(function, name, self.dim)?;
        rows.check_labels(function, name, |l| gradient.refuse_label(l))?;
        // A full-batch model's gradient takes every row: one pull per batch of rows.
        let size = match self.solver.method {
            Some(_) => rows.len(),
            None => self.batch_size,
        };
        Ok(rows.into_mini_batches(size, self.bias_key()))
    }

    /// How the model's kind learns by gradients and predicts (a boosted model: its loss and
    /// prediction from a row's margin), for `function` on model `name`; an error naming both
    /// for a kind that does not (the topic model).
    pub fn gradient(&self, function: &str, name: &str) -> Result<&dyn Gradient> {
        match self.kind.scoring() {
            Some(gradient) => Ok(gradient),
            None => input_err(format!(
                "{function}: model '{name}' is a {} model, which is not trained by gradients{}",
                self.kind.name(),
                self.kind.answers_instead()
            )),
        }
    }

    /// The column of the intercept.
    pub fn bias_key(&self) -> u64 {
        self.dim
    }
}

/// Text field `key` of a training description read as `T`, `default` when it is empty.
fn parsed_or<T: FromStr<Err: Display>>(key: &str, value: &str, default: T) -> Result<T> {
    match value.is_empty() {
        true => Ok(default),
        false => OptionValue::typed(key, value).parsed(),
    }
}

/// An optimizer hyper-parameter: its option, its field, and what it may be.
struct Hyper {
    name: &'static str,
    /// Other names `CREATE MODEL` takes it by.
    aliases: &'static [&'static str],
    field: fn(&mut OptimizerParams) -> &mut f64,
    ok: fn(f64) -> bool,
    allowed: &'static str,
}

impl Hyper {
    /// Its field of `u`.
    fn field<'u>(&self, u: &'u mut OptimizerParams) -> &'u mut f64 {
        (self.field)(u)
    }

    /// `option`'s value, if it is allowed.
    fn read(&self, option: &OptionValue) -> Result<f64> {
        option.number(self.ok, self.allowed)
    }
}

/// Every optimizer hyper-parameter, as `CREATE MODEL` and a training description give them.
const HYPER: [Hyper; 7] = [
    Hyper {
        name: "learning_rate",
        aliases: &["lr", "alpha"],
        field: |u| &mut u.learning_rate,
        ok: |x| x > 0.0,
        allowed: "a finite number above 0",
    },
    Hyper {
        name: "l1",
        aliases: &[],
        field: |u| &mut u.l1,
        ok: |x| x >= 0.0,
        allowed: "a finite number, 0 or more",
    },
    Hyper {
        name: "l2",
        aliases: &[],
        field: |u| &mut u.l2,
        ok: |x| x >= 0.0,
        allowed: "a finite number, 0 or more",
    },
    Hyper {
        name: "beta1",
        aliases: &[],
        field: |u| &mut u.beta1,
        ok: |x| (0.0..1.0).contains(&x),
        allowed: "in [0, 1)",
    },
    Hyper {
        name: "beta2",
        aliases: &[],
        field: |u| &mut u.beta2,
        ok: |x| (0.0..1.0).contains(&x),
        allowed: "in [0, 1)",
    },
    Hyper {
        name: "epsilon",
        aliases: &[],
        field: |u| &mut u.epsilon,
        ok: |x| x > 0.0,
        allowed: "a finite number above 0",
    },
    Hyper {
        name: "beta",
        aliases: &[],
        field: |u| &mut u.beta,
        ok: |x| x >= 0.0,
        allowed: "a finite number, 0 or more",
    },
];

/// The largest dimension: column `dim` (the intercept) must fit a 63-bit key.
const MAX_DIM: u64 = (1 << 63) - 2;
/// The largest mini-batch, in rows.
const MAX_BATCH: usize = 1 << 24;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    /// Rotation needs a kind with a part to rotate and plain SGD; time control needs rotation.
    #[test]
    fn what_rotation_cannot_train_is_refused_naming_the_option() {
        let refusal = |kind: &str, options: &[(&str, &str)]| {
            let mut spec = ModelSpec::new(registry::by_name(kind).unwrap(), 5);
            if kind == "mf" {
                spec.set("users", "3").unwrap();
                spec.set("items", "4").unwrap();
            }
            for (k, v) in options {
                spec.set(k, v).unwrap();
            }
            spec.matrix("m", 0).err().map(|e| e.to_string())
        };
        let rotate = ("parallelism", "rotation");
        let sgd = ("optimizer", "sgd");
        assert_eq!(refusal("mf", &[rotate, sgd, ("step_ms", "auto")]), None);
        let err = refusal("logistic", &[rotate, sgd]).unwrap();
        assert!(err.contains("a part to rotate"), "{err}");
        let err = refusal("mf", &[rotate, ("optimizer", "adam")]).unwrap();
        assert!(err.contains("optimizer = 'sgd'"), "{err}");
        let err = refusal("mf", &[sgd, ("step_ms", "20")]).unwrap();
        assert!(
            err.contains("step_ms") && err.contains("parallelism"),
            "{err}"
        );
        let mut spec = ModelSpec::new(registry::by_name("mf").unwrap(), 0);
        let err = spec.set("step_ms", "soon").unwrap_err().to_string();
        assert!(err.contains("'auto', or a whole number"), "{err}");
    }

    #[test]
    fn a_spec_survives_the_trip_through_its_training_description_and_options() {
        let mut spec = ModelSpec::new(registry::by_name("svm").unwrap(), 123);
        spec.set("optimizer", "FTRL").unwrap();
        spec.set("l1", "0.5").unwrap();
        spec.set("counter", "feats").unwrap();
        spec.set("compression", "sketchml").unwrap();
        spec.set("compression_mode", "always").unwrap();
        let back = ModelSpec::from_training("m", &spec.to_training()).unwrap();
        assert_eq!(back, spec);
        assert_eq!(
            ModelSpec::from_options("m", &spec.to_options()).unwrap(),
            spec
        );
        assert_eq!(back.matrix("m", 2).unwrap().rows, 3);
        let mut softmax = ModelSpec::new(registry::by_name("softmax").unwrap(), 10);
        assert!(softmax.matrix("s", 2).is_err(), "classes is required");
        softmax.set("classes", "4").unwrap();
        let back = ModelSpec::from_training("s", &softmax.to_training()).unwrap();
        assert_eq!(back.kind.outputs(), 4);
        assert_eq!(back.matrix("s", 2).unwrap().rows, 12);
        for (key, value, allowed) in [
            ("learning_rate", "fast", "above 0"),
            ("learning_rate", "NaN", "above 0"),
            ("lr", "0", "above 0"),
            ("l2", "-1", "0 or more"),
            ("batch_size", "0", "from 1 to"),
            ("batch_size", "2.5", "whole number"),
            ("dim", "0", "from 1 to"),
            ("dim", "9223372036854775807", "from 1 to"),
            ("beta1", "1", "[0, 1)"),
        ] {
            let err = spec.set(key, value).unwrap_err().to_string();
            let named = format!("{key} = '{value}' is not allowed");
            assert!(err.contains(&named) && err.contains(allowed), "{err}");
        }
        assert_eq!(
            spec,
            ModelSpec::from_training("m", &spec.to_training()).unwrap()
        );
        spec.set("update", "average").unwrap();
        spec.set("optimizer", "mine").unwrap();
        let err = spec.matrix("m", 0).unwrap_err().to_string();
        assert!(
            err.contains("optimizer 'mine' runs only on the servers"),
            "{err}"
        );
        assert!(spec.set("momentum", "1").is_err());
        let err = spec
            .set("compression_mode", "never")
            .unwrap_err()
            .to_string();
        assert!(err.contains("compression_mode 'never'"), "{err}");
    }

    /// A training description's fields are read as they are typed, and refused as the option
    /// they stand for would be: a description from another writer loads only when it is right.
    #[test]
    fn a_training_description_is_read_field_by_field_and_refused_by_option() {
        let mut spec = ModelSpec::new(registry::by_name("lda").unwrap(), 50);
        for (key, value) in [("topics", "7"), ("beta", "0.05"), ("sync", "ssp")] {
            spec.set(key, value).unwrap();
        }
        spec.set("staleness", "2").unwrap();
        spec.set("workers", "3").unwrap();
        let t = spec.to_training();
        assert_eq!(ModelSpec::from_training("m", &t).unwrap(), spec);
        let mut lbfgs = ModelSpec::new(registry::by_name("logistic").unwrap(), 9);
        lbfgs.set("optimizer", "owlqn").unwrap();
        lbfgs.set("memory", "4").unwrap();
        let back = ModelSpec::from_training("l", &lbfgs.to_training()).unwrap();
        assert_eq!(back, lbfgs);
        assert_eq!(back.solver.method, Some(Method::Owlqn));
        let refused = |change: &dyn Fn(&mut Training), named: &str| {
            let mut t = lbfgs.to_training();
            change(&mut t);
            let err = ModelSpec::from_training("l", &t).unwrap_err().to_string();
            assert!(err.contains(named), "{named}: {err}");
        };
        refused(&|t| t.batch_size = 0, "batch_size = '0' is not allowed");
        refused(&|t| t.dim = 0, "dim = '0' is not allowed");
        refused(
            &|t| t.optimizer.as_mut().unwrap().l1 = -1.0,
            "l1 = '-1' is not allowed",
        );
        refused(
            &|t| t.optimizer.as_mut().unwrap().beta2 = 1.0,
            "beta2 = '1' is not allowed",
        );
        refused(&|t| t.update = 99, "update = '99' is not allowed");
        refused(&|t| t.local_steps = 0, "local_steps = '0' is not allowed");
        refused(
            &|t| t.sync.as_mut().unwrap().staleness = 1 << 40,
            "staleness = '1099511627776'",
        );
        refused(
            &|t| t.sync.as_mut().unwrap().slow_factor = 0.5,
            "slow_factor = '0.5'",
        );
        refused(
            &|t| t.sync.as_mut().unwrap().workers = 5000,
            "workers = '5000'",
        );
        refused(
            &|t| t.solver.as_mut().unwrap().memory = 0,
            "memory = '0' is not allowed",
        );
        refused(
            &|t| t.solver.as_mut().unwrap().method = "newton".into(),
            "optimizer = 'newton'",
        );
        refused(&|t| t.compression = "zip".into(), "compression");
        refused(
            &|t| {
                t.kind_options.insert("colour".into(), "red".into());
            },
            "unknown model option 'colour'",
        );
        refused(&|t| t.optimizer = None, "is not a model");
        refused(&|t| t.kind = "nope".into(), "unknown model kind 'nope'");
    }
}
