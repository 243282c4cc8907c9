//! `ps_train(model, label, indices[, values]) -> Float64`: one pass of training over the rows
//! it aggregates, returning their mean loss (each row's loss taken before the update it
//! joins, i.e. progressive validation).
//!
//! An aggregate, so rows stay in the task that read them: each record batch is cut into
//! mini-batches of the model's `batch_size` rows; per mini-batch the task pulls the weights of
//! the distinct keys it uses (one pruned pull), computes the loss gradient over its rows, and
//! sends one merged push of gradients that the servers turn into weights with the model's
//! optimizer. Only keys and values cross the network. The model name is a constant, read once
//! per task from the call's literal.
//!
//! Each task is a worker in its model's clock table ([`Worker`]): before each pull it waits as
//! the model's consistency model (BSP, SSP, ASP) requires, and its update rule (`sgd`,
//! `consgd`, `dynsgd`, or model averaging through [`LocalModel`]) decides what it pushes.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Instant;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{
    Arg, DOC_SECTION, INDICES_DOC, MODEL_DOC, VALUES_DOC, arity, const_str, indices_type,
    label_type, name_type,
};
use angel_client::TaskChange;

use crate::binding::{Binding, PsBound};
use crate::cluster::ChangeNames;
use crate::local_model::LocalModel;
use crate::mean::Mean;
use crate::model::Model;
use crate::sparse::SparseRows;
use crate::sync::Rule;
use crate::worker::Worker;

const MODEL: Arg = Arg::new("ps_train", 0, "model");
const LABEL: Arg = Arg::new("ps_train", 1, "label");
const INDICES: Arg = Arg::new("ps_train", 2, "indices");
const VALUES: Arg = Arg::new("ps_train", 3, "values");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsTrain {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsTrain {
    fn bind(binding: Binding) -> Self {
        PsTrain {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl AggregateUDFImpl for PsTrain {
    fn name(&self) -> &str {
        "ps_train"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(
            self.name(),
            "ps_train(model, label, indices[, values])",
            args,
            3..=4,
        )?;
        let mut types = vec![
            name_type(MODEL, &args[0])?,
            label_type(LABEL, &args[1])?,
            indices_type(INDICES, &args[2])?,
        ];
        if let Some(values) = args.get(3) {
            types.push(VALUES.numbers(values)?);
        }
        Ok(types)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Train {
            binding: self.binding.clone(),
            name: const_str(MODEL, MODEL.literal_expr(args.exprs))?,
            open: None,
            names: None,
            local: LocalModel::default(),
            mean: Mean::default(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(Mean::state_fields(args.name))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "One pass of training over the rows it aggregates, returning their mean loss \
                 (each row's loss taken before the update it joins: progressive validation). \
                 Rows stay in their task: per mini-batch of the model's batch_size rows, one \
                 pruned pull of weights and one merged push of gradients, which the servers \
                 apply with the model's optimizer. CREATE MODEL runs it once per epoch.",
                "ps_train(model, label, indices[, values])",
            )
            .with_argument("model", MODEL_DOC)
            .with_argument("label", "The row's label: a number (or a boolean).")
            .with_argument("indices", INDICES_DOC)
            .with_argument("values", VALUES_DOC)
            .with_sql_example("SELECT ps_train('a9a', label, idx, val) AS loss FROM train")
            .with_related_udf("ps_predict")
            .build()
        });
        Some(&DOC)
    }
}

/// One task's training pass.
#[derive(Debug)]
struct Train {
    binding: Binding,
    /// The model's name; the model is opened on the first rows.
    name: String,
    /// The model and this task's place in its clock table, from the first rows on.
    open: Option<(Model, Worker)>,
    /// Names of its pushes in a Ballista task, so a rerun of the task repeats them.
    names: Option<ChangeNames>,
    /// Model averaging: the round being trained locally.
    local: LocalModel,
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

/// One mini-batch of SGD, ConSGD or DynSGD: pull at the worker's clock, push the gradients
/// as `change`; returns the summed loss of its rows.
fn sgd_step(
    (model, worker): (&Model, &mut Worker),
    rows: &SparseRows,
    range: Range<usize>,
    change: Option<TaskChange>,
) -> Result<f64> {
    let started = Instant::now();
    let g = rows.gather(range.clone(), model.spec.bias_key());
    let at = worker.before_pull()?;
    let (weights, versions) = model.pull(&g.keys, Some(at))?;
    let (loss, grads) = model.gradients(rows, range, &g, &weights);
    worker.before_push()?;
    let bases = match model.spec.sync.rule {
        Rule::DynSgd => &versions[..],
        _ => &[],
    };
    model.update(&g.keys, &grads, next_step(&model.name), change, bases)?;
    worker.after_step(started);
    Ok(loss)
}

impl Train {
    /// Opens the model and joins its clock table, ordered by the task's first mini-batch.
    fn open(&mut self, rows: &SparseRows) -> Result<()> {
        let model = Model::open(self.binding.master(), &self.name)?;
        self.names = ChangeNames::for_accumulator();
        let first = 0..model.spec.batch_size.min(rows.len());
        let keys = rows.gather(first, model.spec.bias_key()).keys;
        let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
        let worker = Worker::join(
            model.client().clone(),
            &self.name,
            &model.spec.sync,
            self.names.as_ref().map_or(0, ChangeNames::task),
            xxhash_rust::xxh3::xxh3_64(&bytes),
        )?;
        self.open = Some((model, worker));
        Ok(())
    }

    /// Trains on mini-batch `range` of `rows`; returns the summed loss of its rows.
    fn train(&mut self, rows: &SparseRows, range: Range<usize>) -> Result<f64> {
        let Some((model, worker)) = self.open.as_mut() else {
            return Ok(0.0);
        };
        let n = range.len() as u64;
        let loss = match model.spec.sync.rule {
            Rule::Average => self
                .local
                .step((model, worker), rows, range, &mut self.names)?,
            _ => {
                let change = self.names.as_mut().map(ChangeNames::next_change);
                sgd_step((model, worker), rows, range, change)?
            }
        };
        self.binding.reports().progress.add(n, loss);
        Ok(loss)
    }

    /// The task's data ended: pushes what model averaging holds, and leaves the clock table.
    fn finish(&mut self) -> Result<()> {
        if let Some((model, worker)) = self.open.as_mut() {
            self.local.flush((model, worker), &mut self.names)?;
            worker.leave()?;
        }
        Ok(())
    }
}

impl Accumulator for Train {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let rows = SparseRows::from_arrays(
            MODEL.function,
            Some(LABEL.column(values)?),
            INDICES.column(values)?,
            values.get(VALUES.index),
        )?;
        if rows.is_empty() {
            return Ok(());
        }
        if self.open.is_none() {
            self.open(&rows)?;
        }
        let spec = &self.open.as_ref().expect("opened above").0.spec;
        rows.check(MODEL.function, &self.name, spec.dim)?;
        let batch = spec.batch_size;
        for start in (0..rows.len()).step_by(batch) {
            let range = start..(start + batch).min(rows.len());
            self.mean.sum += self.train(&rows, range)?;
        }
        self.mean.rows += rows.len() as i64;
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.finish()?;
        Ok(self.mean.state())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.mean.merge(states);
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.finish()?;
        Ok(self.mean.evaluate())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}
