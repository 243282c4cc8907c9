//! `ps_topics(model, words[, counts]) -> List<Float64>`: a document's topic mixture under a
//! trained topic model (`kind = 'lda'`), one probability per topic, by Gibbs folding-in with
//! the model kept fixed (`angel_training::kinds::lda::infer`): for new documents, or the
//! training ones.
//!
//! Per record batch, one pull of the counts of the batch's distinct words and the topic
//! totals. The model name is a constant, checked at planning.

use std::sync::{Arc, LazyLock};

use angel_training::Model;
use angel_training::kinds::lda::Lda;
use angel_training::kinds::lda::corpus::Corpus;
use angel_training::kinds::lda::infer::Fixed;
use datafusion::arrow::array::{ArrayRef, ListArray};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{Documentation, ScalarFunctionArgs};

use crate::args::{DOC_SECTION, MODEL_DOC, const_str};
use crate::binding::Binding;
use crate::bridge::train_error;
use crate::model_function::{Answer, ModelFunction};
use crate::model_rows::ModelRows;

/// See the module documentation.
pub type PsTopics = ModelFunction<Topics>;

/// What `PsTopics` answers.
#[derive(Debug)]
pub struct Topics;

impl Answer for Topics {
    const ARGS: ModelRows = ModelRows::new("ps_topics", "ps_topics(model, words[, counts])", false);

    fn return_type() -> DataType {
        DataType::new_list(DataType::Float64, true)
    }

    fn answer(binding: &Binding, args: &ScalarFunctionArgs) -> Result<ArrayRef> {
        let function = Self::ARGS.model().function;
        let name = const_str(Self::ARGS.model(), Self::ARGS.model().scalar(args))?;
        let model = Model::open(binding.client()?, &name).map_err(train_error)?;
        let lda = Lda::of(&model, function).map_err(train_error)?;
        let inputs = (args.args[1..].iter())
            .map(|v| v.to_array(args.number_rows))
            .collect::<Result<Vec<_>>>()?;
        let words = (&inputs[0], inputs.get(1));
        let corpus = Corpus::read(function, &name, words, model.spec.dim).map_err(train_error)?;
        let fixed = Fixed::pull(&model, &lda, &corpus).map_err(train_error)?;
        let lists = (0..corpus.docs()).map(|d| {
            let mixture = fixed.mixture(corpus.doc(d), lda.seed);
            Some(mixture.into_iter().map(Some).collect::<Vec<_>>())
        });
        Ok(Arc::new(
            ListArray::from_iter_primitive::<Float64Type, _, _>(lists),
        ))
    }

    fn documentation() -> &'static Documentation {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "A document's topic mixture under a topic model (kind = 'lda'), as a list of one \
                 probability per topic: Gibbs folding-in with the model fixed (40 sweeps, the \
                 last 30 averaged), seeded by the model's seed and the document, so the same \
                 document gets the same mixture. Per record batch, one pull of the counts of \
                 its distinct words.",
                "ps_topics(model, words[, counts])",
            )
            .with_argument("model", MODEL_DOC)
            .with_argument(
                "words",
                "The document's word indices (a list of integers, repeats kept).",
            )
            .with_argument(
                "counts",
                "Optional: each word's count (a list of whole numbers as long).",
            )
            .with_sql_example("SELECT doc, ps_topics('topics', words, counts) AS mixture FROM news")
            .build()
        });
        &DOC
    }
}
