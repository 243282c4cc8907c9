//! `ps_train(model, label, indices[, values]) -> Float64`: one pass of training over the rows
//! it aggregates, returning their mean loss (each row's loss taken before the update it
//! joins, i.e. progressive validation).
//!
//! An aggregate, so rows stay in the task that read them: each record batch is cut into
//! mini-batches of the model's `batch_size` rows; per mini-batch the task pulls the weights of
//! the distinct keys it uses (one pruned pull), computes the loss gradient over its rows, and
//! sends one merged push of gradients that the servers turn into weights with the model's
//! optimizer. Only keys and values cross the network.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, ColumnarValue, Signature, TypeSignature, Volatility,
};

use crate::args::const_str;
use crate::mean::Mean;
use crate::model::Model;
use crate::progress;
use crate::sparse::SparseRows;

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsTrain {
    master: String,
    signature: Signature,
}

impl PsTrain {
    /// The master address this function is bound to; it travels with plans to Ballista
    /// executors ([`crate::cluster::codec`]).
    pub fn master(&self) -> &str {
        &self.master
    }

    /// The function for the service whose master is at `master`.
    pub fn new(master: &str) -> Self {
        PsTrain {
            master: master.to_string(),
            signature: Signature::one_of(
                vec![TypeSignature::Any(3), TypeSignature::Any(4)],
                Volatility::Volatile,
            ),
        }
    }
}

impl AggregateUDFImpl for PsTrain {
    fn name(&self) -> &str {
        "ps_train"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Train {
            master: self.master.clone(),
            model: None,
            mean: Mean::default(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(Mean::state_fields(args.name))
    }
}

/// One task's training pass.
#[derive(Debug)]
struct Train {
    master: String,
    model: Option<Model>,
    /// Summed loss and rows trained.
    mean: Mean,
}

/// Updates this process has sent per model, so Adam's bias correction sees a step number
/// that keeps growing across tasks and epochs.
fn next_step(model: &str) -> u64 {
    static STEPS: OnceLock<Mutex<HashMap<String, Arc<AtomicU64>>>> = OnceLock::new();
    let counter = STEPS
        .get_or_init(Default::default)
        .lock()
        .expect("step map")
        .entry(model.to_string())
        .or_default()
        .clone();
    counter.fetch_add(1, Ordering::Relaxed) + 1
}

impl Train {
    /// Trains on one mini-batch of `rows`; returns the summed loss of its rows.
    fn step(model: &Model, rows: &SparseRows, range: std::ops::Range<usize>) -> Result<f64> {
        let g = rows.gather(range.clone(), model.spec.bias_key());
        let weights = model.weights(&g.keys)?;
        let mut grads = vec![0.0f64; g.keys.len()];
        let mut loss = 0.0;
        for r in range.clone() {
            let (l, d) = model
                .spec
                .kind
                .loss(rows.label(r), rows.margin(r, &g, &weights));
            loss += l;
            if d != 0.0 {
                rows.row(r, &g).for_each(|(s, v)| grads[s] += d * v);
                grads[g.keys.len() - 1] += d;
            }
        }
        let scale = 1.0 / range.len() as f64;
        let grads: Vec<f32> = grads.iter().map(|&x| (x * scale) as f32).collect();
        model.update(&g.keys, &grads, next_step(&model.name))?;
        progress::add(range.len() as u64, loss);
        Ok(loss)
    }
}

impl Accumulator for Train {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if values[0].is_empty() {
            return Ok(());
        }
        if self.model.is_none() {
            let name = const_str(
                "ps_train",
                &[ColumnarValue::Array(values[0].clone())],
                0,
                "model",
            )?;
            self.model = Some(Model::open(&self.master, &name)?);
        }
        let model = self.model.as_ref().expect("opened above");
        let rows =
            SparseRows::from_arrays("ps_train", Some(&values[1]), &values[2], values.get(3))?;
        let batch = model.spec.batch_size;
        for start in (0..rows.len()).step_by(batch) {
            self.mean.sum += Self::step(model, &rows, start..(start + batch).min(rows.len()))?;
        }
        self.mean.rows += rows.len() as i64;
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
        Ok(self.mean.evaluate())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}
