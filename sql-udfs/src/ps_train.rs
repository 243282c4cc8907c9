//! `ps_train(model, label, indices[, values]) -> Float64`, `ps_train(model, user, item,
//! rating)` for a matrix factorization model, or `ps_train(model, words[, counts])` for a topic
//! model: one pass of training over the rows it aggregates, returning their mean loss (each
//! row's loss taken before the update it joins, i.e. progressive validation; a topic model:
//! its documents' part of the log-likelihood per token).
//!
//! An aggregate, so rows stay in the task that read them: each record batch goes to the
//! task's [`TaskPass`], which the model's kind opens (for a kind trained by gradients, one
//! pruned pull and one merged push per mini-batch of the model's `batch_size` rows, in the
//! model's clock table). Only keys and values cross the network. The model name is a
//! constant, read once per task from the call's literal; the function knows no kind.

use std::sync::{Arc, LazyLock};

use angel_training::{Model, TaskPass, Trained};
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
    task: Option<Box<dyn TaskPass>>,
    /// Summed loss and rows trained.
    mean: Mean,
    /// Whether partial states were merged in: the accumulator is the final one, no worker.
    merged: bool,
    /// Whether the pass ended.
    finished: bool,
    /// The rows trained, for the job's progress bar.
    progress: Arc<TaskProgress>,
}

impl Train {
    /// The pass, opened by the model's kind on the first call.
    fn task(&mut self) -> Result<&mut Box<dyn TaskPass>> {
        if self.task.is_none() {
            let model = Model::open(self.binding.client()?, &self.name).map_err(train_error)?;
            let context = self.binding.task_context(MODEL.function);
            let kind = model.spec.kind.clone();
            self.task = Some(kind.open_pass(model, &context).map_err(train_error)?);
        }
        Ok(self.task.as_mut().expect("opened above"))
    }

    /// Counts what the pass trained into the task's mean.
    fn count(&mut self, trained: Trained) {
        self.mean.rows += trained.rows as i64;
        self.mean.sum += trained.loss;
    }

    /// The task's data ended: see [`TaskPass::finish`] (a rotation worker, say, trains now).
    /// Every `worker` (an accumulator of an input partition, not the one merging their
    /// states) takes part in a round, rows or none.
    fn finish(&mut self, worker: bool) -> Result<()> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        if self.task.is_none() && worker {
            self.task()?;
        }
        let progress = self.progress.clone();
        let finished = match self.task.take() {
            Some(mut task) => task.finish(&mut |rows, loss| progress.add(rows, loss)),
            None => Ok(Trained::default()),
        };
        self.progress.flush();
        self.count(finished.map_err(train_error)?);
        Ok(())
    }
}

impl Accumulator for Train {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if values.first().is_none_or(|v| v.is_empty()) {
            return Ok(());
        }
        let progress = self.progress.clone();
        // The columns after the model's name, whose argument is a new array at every call.
        let columns = values.get(1..).unwrap_or_default();
        let trained = (self.task()?)
            .add(columns, &mut |rows, loss| progress.add(rows, loss))
            .map_err(train_error)?;
        self.count(trained);
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
