//! [`OptimizerRegistry`]: the optimizers a server applies, by name, apart from PS functions.
//! A server reports them with their state layout when it registers, so clients learn from the
//! service how many rows a model trained with each one needs.

use std::sync::Arc;

use angel_proto::{OptimizerInfo, Result};

use angel_optim::builtin as rules;

use super::{MAX_STATE_ROWS, Optimizer};
use crate::registry::Registry;

/// The optimizers a server can apply to pushed gradients.
#[derive(Clone)]
pub struct OptimizerRegistry {
    optimizers: Registry<dyn Optimizer>,
}

impl OptimizerRegistry {
    /// The built-ins: sgd, adagrad, adam, ftrl.
    pub fn builtin() -> Self {
        let mut registry = OptimizerRegistry {
            optimizers: Registry::new("optimizer"),
        };
        registry
            .register(rules::Sgd)
            .register(rules::Adagrad)
            .register(rules::Adam)
            .register(rules::Ftrl);
        registry
    }

    /// Adds (or replaces) an optimizer under its name.
    ///
    /// # Panics
    /// If it keeps more than [`MAX_STATE_ROWS`] rows of state: a programming error of the
    /// optimizer, found when the server is built, never at run time.
    pub fn register(&mut self, optimizer: impl Optimizer) -> &mut Self {
        assert!(
            optimizer.state_rows() <= MAX_STATE_ROWS,
            "optimizer '{}' keeps more than {MAX_STATE_ROWS} state rows",
            optimizer.name()
        );
        self.optimizers
            .insert(optimizer.name().to_string(), Arc::new(optimizer));
        self
    }

    /// The optimizer named `name`, or NOT_FOUND listing what is registered.
    pub fn get(&self, name: &str) -> Result<Arc<dyn Optimizer>> {
        self.optimizers.get(name)
    }

    /// Every optimizer with its state layout, as the server reports them to the master.
    pub fn infos(&self) -> Vec<OptimizerInfo> {
        self.optimizers
            .items()
            .map(|o| OptimizerInfo {
                name: o.name().to_string(),
                state_rows: o.state_rows() as u32,
            })
            .collect()
    }
}

impl Default for OptimizerRegistry {
    fn default() -> Self {
        Self::builtin()
    }
}
