//! Reading the answers of one-row queries (a pass's mean and count, a holdout's figures).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::prelude::DataFrame;

/// The first two values of the frame's first row.
pub(super) async fn first_row(df: DataFrame) -> Result<(ScalarValue, ScalarValue)> {
    let batches = df.collect().await?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return plan_err!("a query that answers one row answered none");
    };
    Ok((
        ScalarValue::try_from_array(batch.column(0), 0)?,
        ScalarValue::try_from_array(batch.column(1), 0)?,
    ))
}

/// A number answered as any numeric type, as f64; `None` for NULL or a non-number.
pub(super) fn float(v: &ScalarValue) -> Option<f64> {
    match v.cast_to(&DataType::Float64) {
        Ok(ScalarValue::Float64(f)) => f,
        _ => None,
    }
}
