//! A statement's epoch table (which its kind's driver makes) registered as the table
//! `<model>_epochs`.

use datafusion::arrow::array::RecordBatch;
use datafusion::common::Result;
use datafusion::prelude::SessionContext;

/// Registers `batch` as model `model`'s epoch table `<model>_epochs`, replacing the last
/// statement's; returns it.
pub(super) fn register(
    ctx: &SessionContext,
    model: &str,
    batch: RecordBatch,
) -> Result<RecordBatch> {
    let name = format!("{model}_epochs");
    ctx.deregister_table(&name)?;
    ctx.register_batch(&name, batch.clone())?;
    Ok(batch)
}
