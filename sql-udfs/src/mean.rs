//! [`Mean`]: the state of aggregates that return a mean (`ps_train`'s loss, `ps_logloss`),
//! carried between partial and final aggregation as (sum, rows); [`ScoredMean`]: the
//! accumulator of the evaluation aggregates that average a term of (label, score) pairs.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type, Int64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::Accumulator;
use datafusion::logical_expr::utils::format_state_name;

use crate::args::{Arg, scored};

/// A sum over some rows and their number.
#[derive(Debug, Default, Clone, Copy)]
pub struct Mean {
    /// Sum of the rows' values.
    pub sum: f64,
    /// Rows summed.
    pub rows: i64,
}

impl Mean {
    /// The state fields of aggregate `name`.
    pub fn state_fields(name: &str) -> Vec<FieldRef> {
        vec![
            Arc::new(Field::new(
                format_state_name(name, "sum"),
                DataType::Float64,
                true,
            )),
            Arc::new(Field::new(
                format_state_name(name, "rows"),
                DataType::Int64,
                true,
            )),
        ]
    }

    /// The partial state.
    pub fn state(&self) -> Vec<ScalarValue> {
        vec![
            ScalarValue::Float64(Some(self.sum)),
            ScalarValue::Int64(Some(self.rows)),
        ]
    }

    /// Adds partial states.
    pub fn merge(&mut self, states: &[ArrayRef]) {
        self.sum += states[0]
            .as_primitive::<Float64Type>()
            .iter()
            .flatten()
            .sum::<f64>();
        self.rows += states[1]
            .as_primitive::<Int64Type>()
            .iter()
            .flatten()
            .sum::<i64>();
    }

    /// The mean, NULL over no rows.
    pub fn evaluate(&self) -> ScalarValue {
        self.finished_by(|mean| mean)
    }

    /// `finish(mean)`, NULL over no rows.
    pub fn finished_by(&self, finish: fn(f64) -> f64) -> ScalarValue {
        ScalarValue::Float64((self.rows > 0).then(|| finish(self.sum / self.rows as f64)))
    }
}

/// The mean of `term(label, score)` over the (label, score) pairs of arguments `label` and
/// `score` ([`scored`]: rows with a NULL skipped, a NaN refused).
#[derive(Debug)]
pub struct ScoredMean {
    mean: Mean,
    args: (Arg, Arg),
    term: fn(f64, f64) -> f64,
    /// Applied to the mean at the end (a root mean square's root).
    finish: fn(f64) -> f64,
}

impl ScoredMean {
    /// An empty mean of `term` over arguments `label` and `score`.
    pub fn new(label: Arg, score: Arg, term: fn(f64, f64) -> f64) -> Self {
        ScoredMean {
            mean: Mean::default(),
            args: (label, score),
            term,
            finish: |mean| mean,
        }
    }

    /// The same, returning `finish(mean)`.
    pub fn finished_by(self, finish: fn(f64) -> f64) -> Self {
        ScoredMean { finish, ..self }
    }
}

impl Accumulator for ScoredMean {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for (label, score) in scored(self.args.0, self.args.1, values)? {
            self.mean.sum += (self.term)(label, score);
            self.mean.rows += 1;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(self.mean.state())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.mean.merge(states);
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.mean.finished_by(self.finish))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}
