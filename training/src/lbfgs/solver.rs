//! [`Solver`]: how a model is trained, by mini-batch steps of the servers' optimizer or by a
//! full-batch quasi-Newton method (`optimizer = 'lbfgs'` or `'owlqn'`), with the latter's
//! options `memory` and `tolerance`.

use crate::error::{Result, option_err};
use crate::options::OptionValue;

/// A full-batch quasi-Newton method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// L-BFGS, for a smooth objective (an L2 penalty at most).
    Lbfgs,
    /// OWL-QN: L-BFGS restricted to an orthant per iteration, for an L1 penalty.
    Owlqn,
}

impl Method {
    /// The name option `optimizer` selects it by.
    pub fn name(self) -> &'static str {
        match self {
            Method::Lbfgs => "lbfgs",
            Method::Owlqn => "owlqn",
        }
    }

    /// The method named `name` (an `optimizer` value), if it is one.
    pub fn named(name: &str) -> Option<Method> {
        match name {
            "lbfgs" | "l-bfgs" => Some(Method::Lbfgs),
            "owlqn" | "owl-qn" => Some(Method::Owlqn),
            _ => None,
        }
    }
}

/// See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Solver {
    /// `None`: mini-batch steps, the servers applying the model's optimizer.
    pub method: Option<Method>,
    /// Pairs of the history (L-BFGS's `m`).
    pub memory: usize,
    /// Training stops when the gradient's norm, or the objective's relative change over an
    /// iteration, falls below it.
    pub tolerance: f64,
}

impl Default for Solver {
    /// Mini-batch steps; 10 pairs and a tolerance of 1e-6 once a method is chosen (Spark
    /// MLlib's and scikit-learn's defaults are 10 and 1e-6 / 1e-4).
    fn default() -> Self {
        Solver {
            method: None,
            memory: DEFAULT_MEMORY,
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

const DEFAULT_MEMORY: usize = 10;
const DEFAULT_TOLERANCE: f64 = 1e-6;
/// The longest history, in pairs.
const MAX_MEMORY: u64 = 100;
/// What `tolerance` may be.
const TOLERANCE: (fn(f64) -> bool, &str) = (|x| x > 0.0 && x < 1.0, "a number in (0, 1)");

impl Solver {
    /// Sets `option` if it is one of the solver's (`memory`, `tolerance`); says whether it was.
    pub fn set(&mut self, option: &OptionValue) -> Result<bool> {
        match option.key.to_ascii_lowercase().as_str() {
            "memory" => self.memory = option.whole(1, MAX_MEMORY)? as usize,
            "tolerance" => self.tolerance = option.number(TOLERANCE.0, TOLERANCE.1)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Reads a training description's solver back (`None`: mini-batch steps), each option
    /// checked as [`Solver::set`] checks it.
    pub fn from_proto(solver: Option<&angel_client::Solver>) -> Result<Solver> {
        let Some(s) = solver else {
            return Ok(Solver::default());
        };
        let Some(method) = Method::named(&s.method) else {
            return OptionValue::typed("optimizer", &s.method).refuse("'lbfgs' or 'owlqn'");
        };
        let memory = OptionValue::typed("memory", &s.memory.to_string()).whole(1, MAX_MEMORY)?;
        let tolerance = OptionValue::typed("tolerance", &s.tolerance.to_string())
            .number(TOLERANCE.0, TOLERANCE.1)?;
        Ok(Solver {
            method: Some(method),
            memory: memory as usize,
            tolerance,
        })
    }

    /// Refuses `memory` or `tolerance` set for a model trained by mini-batch steps, where they
    /// would mean nothing.
    pub fn check(&self, optimizer: &str) -> Result<()> {
        let set = (self.memory != DEFAULT_MEMORY) || (self.tolerance != DEFAULT_TOLERANCE);
        if self.method.is_none() && set {
            return option_err(format!(
                "model options memory and tolerance are the full-batch solvers' (optimizer = \
                 'lbfgs' or 'owlqn'), not optimizer '{optimizer}''s"
            ));
        }
        Ok(())
    }

    /// The wire's description, `None` for mini-batch steps.
    pub fn to_proto(&self) -> Option<angel_client::Solver> {
        self.method.map(|m| angel_client::Solver {
            method: m.name().to_string(),
            memory: self.memory as u32,
            tolerance: self.tolerance,
        })
    }

    /// The options that give `solver` back, as `CREATE MODEL` takes them.
    pub fn options(solver: &angel_client::Solver) -> [(&'static str, String); 3] {
        [
            ("optimizer", solver.method.clone()),
            ("memory", solver.memory.to_string()),
            ("tolerance", solver.tolerance.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_through_the_wire() {
        let mut solver = Solver {
            method: Method::named("owlqn"),
            ..Solver::default()
        };
        for (key, value) in [("memory", "7"), ("TOLERANCE", "1e-9")] {
            assert!(solver.set(&OptionValue { key, value }).unwrap());
        }
        let options = Solver::options(&solver.to_proto().unwrap());
        let mut back = Solver::default();
        for (key, value) in &options[1..] {
            back.set(&OptionValue { key, value }).unwrap();
        }
        back.method = Method::named(&options[0].1);
        assert_eq!(back, solver);
        let refused = (Solver::default().set(&OptionValue {
            key: "memory",
            value: "0",
        }))
        .unwrap_err();
        assert!(refused.to_string().contains("memory = '0'"), "{refused}");
        let idle = Solver {
            memory: 3,
            ..Solver::default()
        };
        assert!(
            idle.check("adam")
                .unwrap_err()
                .to_string()
                .contains("'adam'")
        );
    }
}
