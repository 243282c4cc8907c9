//! The update rules: how a worker's mini-batch changes the model (`update` option).
//!
//! - [`sgd`]: each gradient goes to the servers' optimizer as it is (`sgd`), scaled by 1/W
//!   (`consgd`), or by its staleness (`dynsgd`);
//! - [`average`]: local rounds whose model differences are averaged on the servers.

pub mod average;
pub mod sgd;

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// How a worker's mini-batch changes the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Each gradient goes to the servers' optimizer as it is.
    Sgd,
    /// Local SGD for `local_steps` mini-batches, then the model difference / W is added on
    /// the servers (model averaging).
    Average,
    /// ConSGD (Angel+): each update's change scaled by 1/W.
    ConSgd,
    /// DynSGD (Angel+): an update computed on partition version v' applied at version v is
    /// scaled by 1/(v - v' + 1).
    DynSgd,
}

impl Rule {
    /// The option values, in the order of the variants.
    pub const NAMES: &[&str] = &["sgd", "average", "consgd", "dynsgd"];

    const ALL: [Rule; 4] = [Rule::Sgd, Rule::Average, Rule::ConSgd, Rule::DynSgd];

    /// The factor the servers scale each update's change by before the optimizer sees it
    /// (ConSGD's 1/W; the others 1, DynSGD's being the servers' to compute).
    pub fn scale(self, workers: u32) -> f64 {
        match self {
            Rule::ConSgd => 1.0 / f64::from(workers.max(1)),
            _ => 1.0,
        }
    }
}

impl FromStr for Rule {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let name = s.trim().to_ascii_lowercase();
        match Rule::NAMES.iter().position(|n| *n == name) {
            Some(i) => Ok(Rule::ALL[i]),
            None => Err(Error::Option(format!(
                "unknown update rule '{s}' (expected {})",
                Rule::NAMES.join(", ")
            ))),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = Rule::ALL.iter().position(|r| r == self).unwrap_or(0);
        f.write_str(Rule::NAMES[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_back_as_written_and_consgd_scales_by_the_workers() {
        for rule in Rule::ALL {
            assert_eq!(rule.to_string().parse::<Rule>().unwrap(), rule);
        }
        assert_eq!(Rule::ConSgd.scale(4), 0.25);
        assert_eq!(Rule::ConSgd.scale(0), 1.0);
        assert_eq!(Rule::DynSgd.scale(4), 1.0);
        assert!("adam".parse::<Rule>().is_err());
    }
}
