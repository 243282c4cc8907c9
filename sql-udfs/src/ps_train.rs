//! `ps_train(model, label, indices[, values]) -> Float64`, `ps_train(model, user, item,
//! rating)` for a matrix factorization model, or `ps_train(model, words[, counts])` for a topic
//! model: one pass of training over the rows it aggregates, returning their mean loss (each
//! row's loss taken before the update it joins, i.e. progressive validation; a topic model:
//! its documents' part of the log-likelihood per token).
//!
//! An aggregate, so rows stay in the task that read them: each record batch is cut into
//! mini-batches of the model's `batch_size` rows and trained by the task's
//! [`angel_training::TrainTask`] (one pruned pull, one merged push per mini-batch, in the
//! model's clock table). Only keys and values cross the network. The model name is a
//! constant, read once per task from the call's literal.

use std::sync::{Arc, LazyLock};

use angel_training::kinds::Inputs;
use angel_training::kinds::gbdt::task::TreeTask;
use angel_training::kinds::kmeans::task::ClusterTask;
use angel_training::kinds::lda::task::TopicTask;
use angel_training::lbfgs::task::GradientTask;
use angel_training::{Model, ModelSpec, RotationTask, TrainTask};
use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{
    Arg, DOC_SECTION, INDICES_DOC, MODEL_DOC, USER_ITEM_DOC, VALUES_DOC, arity, const_str,
    indices_type, integer_type, is_point_type, label_type, name_type,
};
use crate::binding::{Binding, PsBound};
use crate::bridge::train_error;
use crate::mean::Mean;
use crate::task_progress::TaskProgress;

const MODEL: Arg = Arg::new("ps_train", 0, "model");
const LABEL: Arg = Arg::new("ps_train", 1, "label");
const INDICES: Arg = Arg::new("ps_train", 2, "indices");
const VALUES: Arg = Arg::new("ps_train", 3, "values");
const USER: Arg = Arg::new("ps_train", 1, "user");
const ITEM: Arg = Arg::new("ps_train", 2, "item");
const RATING: Arg = Arg::new("ps_train", 3, "rating");
const WORDS: Arg = Arg::new("ps_train", 1, "words");
const COUNTS: Arg = Arg::new("ps_train", 2, "counts");
const POINT: Arg = Arg::new("ps_train", 1, "point");
const SYNTAX: &str = "ps_train(model, label, indices[, values]), ps_train(model, user, item, \
                      rating), ps_train(model, words[, counts]) or ps_train(model, point)";

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
        arity(self.name(), SYNTAX, args, 2..=4)?;
        if matches!(
            args[1],
            DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
        ) {
            arity(self.name(), SYNTAX, args, 2..=3)?;
            if args.len() == 2 && is_point_type(&args[1]) {
                return Ok(vec![name_type(MODEL, &args[0])?, POINT.numbers(&args[1])?]);
            }
            let mut types = vec![name_type(MODEL, &args[0])?, indices_type(WORDS, &args[1])?];
            if let Some(counts) = args.get(2) {
                types.push(COUNTS.numbers(counts)?);
            }
            return Ok(types);
        }
        arity(self.name(), SYNTAX, args, 3..=4)?;
        if args[2].is_integer() {
            arity(self.name(), SYNTAX, args, 4..=4)?;
            return Ok(vec![
                name_type(MODEL, &args[0])?,
                integer_type(USER, &args[1])?,
                integer_type(ITEM, &args[2])?,
                label_type(RATING, &args[3])?,
            ]);
        }
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
        let name = const_str(MODEL, MODEL.literal_expr(args.exprs))?;
        let progress = self.binding.reports().progress.clone();
        Ok(Box::new(Train {
            progress: Arc::new(TaskProgress::new(
                progress,
                self.binding.client().ok(),
                &name,
            )),
            binding: self.binding.clone(),
            name,
            task: None,
            mean: Mean::default(),
            merged: false,
            finished: false,
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
                SYNTAX,
            )
            .with_argument("model", MODEL_DOC)
            .with_argument("label", "The row's label: a number (or a boolean).")
            .with_argument("indices", INDICES_DOC)
            .with_argument("values", VALUES_DOC)
            .with_argument("user, item", USER_ITEM_DOC)
            .with_argument("rating", "A matrix factorization model's rating: a number.")
            .with_argument(
                "words, counts",
                "A topic model's document: a list of word indices (with repeats), or the \
                 distinct words and a list of their counts.",
            )
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
    /// The pass, from the first rows on.
    task: Option<Pass>,
    /// Summed loss and rows trained.
    mean: Mean,
    /// Whether partial states were merged in: the accumulator is the final one, no worker.
    merged: bool,
    /// Whether the pass ended.
    finished: bool,
    /// The rows trained, for the job's progress bar.
    progress: Arc<TaskProgress>,
}

/// How the task trains: mini-batch after mini-batch as its rows come, or, under model
/// rotation and for a topic model, all its rows once they are all in; a full-batch model's
/// task sums the gradient of its rows and pushes it when they end.
#[derive(Debug)]
enum Pass {
    Steps(Box<TrainTask>),
    FullBatch(Box<GradientTask>),
    Clusters(Box<ClusterTask>),
    Rotation(Box<RotationTask>),
    Topics(Box<TopicTask>),
    Trees(Box<TreeTask>),
}

impl Train {
    /// The pass, opened on the first call.
    fn task(&mut self) -> Result<&mut Pass> {
        if self.task.is_none() {
            let model = Model::open(self.binding.client()?, &self.name).map_err(train_error)?;
            let topics = model.spec.kind.topics().is_some();
            let trees = model.spec.kind.trees().is_some();
            let full_batch = model.spec.solver.method.is_some();
            let clusters = model.spec.kind.clusters().is_some();
            self.task = Some(match (topics, model.spec.sync.rotation) {
                _ if clusters => Pass::Clusters(Box::new(
                    ClusterTask::new(model, MODEL.function).map_err(train_error)?,
                )),
                _ if full_batch => Pass::FullBatch(Box::new(GradientTask::new(model))),
                _ if trees => Pass::Trees(Box::new(
                    TreeTask::new(model, MODEL.function, self.binding.tree_workers().clone())
                        .map_err(train_error)?,
                )),
                (true, _) => Pass::Topics(Box::new(
                    TopicTask::new(model, MODEL.function, self.binding.topic_workers().clone())
                        .map_err(train_error)?,
                )),
                (false, true) => Pass::Rotation(Box::new(RotationTask::new(
                    model,
                    MODEL.function,
                    self.binding.kept().clone(),
                ))),
                (false, false) => Pass::Steps(Box::new(TrainTask::new(model))),
            });
        }
        Ok(self.task.as_mut().expect("opened above"))
    }

    /// The task's data ended: see [`TrainTask::finish`]; a rotation worker trains now. Every
    /// `worker` (an accumulator of an input partition, not the one merging their states)
    /// takes part in a rotation, rows or none.
    fn finish(&mut self, worker: bool) -> Result<()> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        if self.task.is_none() && worker {
            self.task()?;
        }
        let progress = self.progress.clone();
        let finished = match self.task.as_mut() {
            Some(Pass::Steps(task)) => task.finish().map_err(train_error),
            Some(Pass::FullBatch(task)) => {
                task.finish().map_err(train_error)?;
                self.task = None;
                Ok(())
            }
            Some(Pass::Clusters(task)) => {
                task.finish().map_err(train_error)?;
                self.task = None;
                Ok(())
            }
            Some(Pass::Rotation(task)) => {
                let trained = task
                    .run(|rows, loss| progress.add(rows, loss))
                    .map_err(train_error)?;
                // Under time control a round trains some rows more than once, others not.
                self.mean.rows += trained.rows as i64;
                self.mean.sum += trained.loss;
                self.task = None;
                Ok(())
            }
            Some(Pass::Topics(task)) => {
                let round = task
                    .run(|tokens, _| progress.add(tokens, 0.0))
                    .map_err(train_error)?;
                self.mean.rows += round.tokens as i64;
                self.mean.sum += round.doc_likelihood;
                self.task = None;
                Ok(())
            }
            Some(Pass::Trees(task)) => {
                let round = task.run().map_err(train_error)?;
                progress.add(round.rows, round.sum);
                self.mean.rows += round.rows as i64;
                self.mean.sum += round.sum;
                self.task = None;
                Ok(())
            }
            None => Ok(()),
        };
        self.progress.flush();
        finished
    }
}

impl Accumulator for Train {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if values.first().is_none_or(|v| v.is_empty()) {
            return Ok(());
        }
        let (binding, name) = (self.binding.clone(), self.name.clone());
        let progress = self.progress.clone();
        let (rows, trained) = match self.task()? {
            Pass::Steps(task) => train(&binding, (&name, &progress), task, values)?,
            Pass::FullBatch(task) => {
                let spec = &task.model().spec;
                let batches = batches(&binding, &name, spec, values)?;
                let summed = task.add(&batches).map_err(train_error)?;
                progress.add(summed.rows, summed.loss);
                (summed.rows as usize, summed.loss)
            }
            Pass::Rotation(task) => {
                let (label, inputs) = columns(&task.model().spec, values)?;
                task.add(label, inputs);
                // Read and counted as they train: see `finish`.
                (0, 0.0)
            }
            Pass::Topics(task) => {
                task.add(values.get(WORDS.index..).unwrap_or_default());
                (0, 0.0)
            }
            Pass::Clusters(task) => {
                let points = values.get(POINT.index..).unwrap_or_default();
                let (rows, inertia) = task.add(points).map_err(train_error)?;
                progress.add(rows, inertia);
                (rows as usize, inertia)
            }
            Pass::Trees(task) => {
                task.add(values.get(LABEL.index..).unwrap_or_default());
                (0, 0.0)
            }
        };
        self.mean.rows += rows as i64;
        self.mean.sum += trained;
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.finish(true)?;
        Ok(self.mean.state())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.merged = true;
        self.mean.merge(states);
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.finish(!self.merged)?;
        Ok(self.mean.evaluate())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// The label and the input columns of a call's `values`, as the model's kind takes them:
/// `(model, label, indices[, values])` or `(model, user, item, rating)`.
fn columns<'a>(spec: &ModelSpec, values: &'a [ArrayRef]) -> Result<(&'a ArrayRef, &'a [ArrayRef])> {
    let rows = values.get(LABEL.index..).unwrap_or_default();
    Ok(match spec.kind.inputs() {
        Inputs::Features => (LABEL.column(values)?, &rows[1..]),
        Inputs::Pairs => (RATING.column(values)?, &rows[..2]),
        Inputs::Documents => {
            return datafusion::common::exec_err!(
                "ps_train: a topic model's rows are its documents (ps_train(model, words[, \
                 counts]))"
            );
        }
        Inputs::Points => {
            return datafusion::common::exec_err!(
                "ps_train: a k-means model's rows are its points (ps_train(model, point) or \
                 ps_train(model, indices, values))"
            );
        }
    })
}

/// The mini-batches of one batch of rows of model `name`, read once and kept across epochs
/// when the job keeps its rows in memory.
fn batches(
    binding: &Binding,
    name: &str,
    spec: &ModelSpec,
    values: &[ArrayRef],
) -> Result<Arc<angel_training::rows::MiniBatches>> {
    // The model name argument is a new array at every call; the rows are not.
    let rows = values.get(LABEL.index..).unwrap_or_default();
    let (label, inputs) = columns(spec, values)?;
    let read = || spec.mini_batches(MODEL.function, name, (label, inputs));
    (binding.key_lists().get_or_read(name, rows, read)).map_err(train_error)
}

/// Trains `task` of model `name` on one batch of rows, mini-batch after mini-batch; returns
/// the rows and their summed loss.
fn train(
    binding: &Binding,
    (name, progress): (&str, &TaskProgress),
    task: &mut TrainTask,
    values: &[ArrayRef],
) -> Result<(usize, f64)> {
    let spec = task.model().spec.clone();
    let batches = batches(binding, name, &spec, values)?;
    let sum = task
        .train(&batches, |rows, loss| progress.add(rows, loss))
        .map_err(train_error)?;
    Ok((batches.rows.len(), sum))
}
