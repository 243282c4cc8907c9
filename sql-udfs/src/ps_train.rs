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
use angel_client::runtime::Started;
use angel_client::{Ack, TaskChange};

use crate::binding::{Binding, PsBound};
use crate::bridge::block_on;
use crate::cluster::ChangeNames;
use crate::local_model::LocalModel;
use crate::mean::Mean;
use crate::model::{Model, ModelSpec};
use crate::sparse::{Gathered, MiniBatches, SparseRows};
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
            model: None,
            worker: None,
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
    /// The model, from the first rows on.
    model: Option<Model>,
    /// This task's place in the model's clock table, from the first rows on.
    worker: Option<Worker>,
    /// Names of its pushes in a Ballista task, so a rerun of the task repeats them.
    names: Option<ChangeNames>,
    /// Model averaging: the round being trained locally.
    local: LocalModel,
    /// Summed loss and rows trained.
    mean: Mean,
}

/// Updates this process has sent per model (by service-wide name: an executor may train
/// models of the same name for jobs of several namespaces), so Adam's bias correction sees a
/// step number that keeps growing across tasks and epochs.
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

/// A pull in flight: weights and the versions of the partitions read.
type Ahead = Started<(Vec<f32>, Vec<Ack>)>;

/// One mini-batch of SGD, ConSGD or DynSGD: pull at the worker's clock (or take the pull
/// `ahead` started for it), start the pull of the `next` mini-batch where the consistency
/// model allows, and push the gradients as `change`; returns the summed loss of its rows.
fn sgd_step(
    (model, worker): (&Model, &mut Worker),
    (rows, range, g): (&SparseRows, Range<usize>, &Gathered),
    (ahead, next): (&mut Option<Ahead>, Option<&Gathered>),
    change: Option<TaskChange>,
) -> Result<f64> {
    let started = Instant::now();
    let (weights, versions) = match ahead.take() {
        Some(pull) => block_on(pull.join())?,
        None => {
            let at = worker.before_pull()?;
            model.pull(&g.keys, Some(at))?
        }
    };
    if let Some(next) = next
        && let Some(step) = worker.pull_ahead()?
    {
        *ahead = Some(model.pull_ahead(next.keys.clone(), step));
    }
    let (loss, grads) = model.gradients(rows, range, g, &weights);
    worker.before_push()?;
    let bases = match model.spec.sync.rule {
        Rule::DynSgd => &versions[..],
        _ => &[],
    };
    model.update(
        &g.keys,
        &grads,
        next_step(&model.client().qualify(&model.name)),
        change,
        bases,
    )?;
    worker.after_step(started);
    Ok(loss)
}

impl Train {
    /// The model, opened on the first call.
    fn model(&mut self) -> Result<&Model> {
        if self.model.is_none() {
            self.model = Some(Model::open(self.binding.client()?, &self.name)?);
        }
        Ok(self.model.as_ref().expect("opened above"))
    }

    /// Joins the model's clock table, ordered by the task's first mini-batch (its keys in row
    /// order, so BSP orders pushes the same way at every run).
    fn join(&mut self, first: &Gathered) -> Result<()> {
        let model = self.model()?;
        let client = model.client().clone();
        let sync = model.spec.sync.clone();
        self.names = ChangeNames::for_accumulator();
        self.worker = Some(Worker::join(
            client,
            &self.name,
            &sync,
            self.names.as_ref().map_or(0, ChangeNames::task),
            first.fingerprint(),
        )?);
        Ok(())
    }

    /// Trains on the mini-batches of one record batch, in order; returns the summed loss.
    fn train(&mut self, batches: &MiniBatches) -> Result<f64> {
        let mut ahead = None;
        let mut sum = 0.0;
        for (i, (range, g)) in batches.batches.iter().enumerate() {
            let next = batches.batches.get(i + 1).map(|(_, g)| g);
            let loss = self.step((&batches.rows, range.clone(), g), (&mut ahead, next))?;
            self.binding
                .reports()
                .progress
                .add(range.len() as u64, loss);
            sum += loss;
        }
        Ok(sum)
    }

    /// Trains on one mini-batch; returns the summed loss of its rows.
    fn step(
        &mut self,
        batch: (&SparseRows, Range<usize>, &Gathered),
        pipeline: (&mut Option<Ahead>, Option<&Gathered>),
    ) -> Result<f64> {
        let (Some(model), Some(worker)) = (self.model.as_ref(), self.worker.as_mut()) else {
            return Ok(0.0);
        };
        match model.spec.sync.rule {
            Rule::Average => self.local.step((model, worker), batch, &mut self.names),
            _ => {
                let change = self.names.as_mut().map(ChangeNames::next_change);
                sgd_step((model, worker), batch, pipeline, change)
            }
        }
    }

    /// The task's data ended: pushes what model averaging holds, and leaves the clock table.
    fn finish(&mut self) -> Result<()> {
        if let (Some(model), Some(worker)) = (self.model.as_ref(), self.worker.as_mut()) {
            self.local.flush((model, worker), &mut self.names)?;
            worker.leave()?;
        }
        Ok(())
    }
}

/// A record batch's rows, checked against model `name` and cut into its mini-batches.
fn read(values: &[ArrayRef], name: &str, spec: &ModelSpec) -> Result<MiniBatches> {
    let rows = SparseRows::from_arrays(
        MODEL.function,
        Some(LABEL.column(values)?),
        INDICES.column(values)?,
        values.get(VALUES.index),
    )?;
    rows.check(MODEL.function, name, spec.dim)?;
    Ok(rows.into_mini_batches(spec.batch_size, spec.bias_key()))
}

impl Accumulator for Train {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if values.first().is_none_or(|v| v.is_empty()) {
            return Ok(());
        }
        let spec = self.model()?.spec.clone();
        let key_lists = self.binding.key_lists().clone();
        // The model name argument is a new array at every call; the rows are not.
        let rows = values.get(LABEL.index..).unwrap_or_default();
        let batches =
            key_lists.get_or_read(&self.name, rows, || read(values, &self.name, &spec))?;
        if self.worker.is_none()
            && let Some((_, first)) = batches.batches.first()
        {
            self.join(first)?;
        }
        self.mean.sum += self.train(&batches)?;
        self.mean.rows += batches.rows.len() as i64;
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
