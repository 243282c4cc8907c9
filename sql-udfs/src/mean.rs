//! [`Mean`]: the state of aggregates that return a mean (`ps_train`'s loss, `ps_logloss`),
//! carried between partial and final aggregation as (sum, rows).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::utils::format_state_name;

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
        ScalarValue::Float64((self.rows > 0).then(|| self.sum / self.rows as f64))
    }
}
