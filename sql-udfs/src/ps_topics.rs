//! `ps_topics(model, words[, counts]) -> List<Float64>`: a document's topic mixture under a
//! trained topic model (`kind = 'lda'`), one probability per topic, by Gibbs folding-in with
//! the model kept fixed (`angel_training::kinds::lda::infer`): for new documents, or the
//! training ones.
//!
//! Per record batch, one pull of the counts of the batch's distinct words and the topic
//! totals. The model name is a constant, checked at planning.

use std::sync::LazyLock;

use angel_training::Model;
use angel_training::kinds::lda::Lda;
use angel_training::kinds::lda::corpus::Corpus;
use angel_training::kinds::lda::infer::Fixed;
use datafusion::arrow::array::ListArray;
use datafusion::arrow::datatypes::{DataType, FieldRef, Float64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{DOC_SECTION, MODEL_DOC, array_result, const_str, return_field};
use crate::binding::{Binding, PsBound};
use crate::bridge::train_error;
use crate::model_rows::ModelRows;

const ARGS: ModelRows = ModelRows::new("ps_topics", "ps_topics(model, words[, counts])", false);

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsTopics {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsTopics {
    fn bind(binding: Binding) -> Self {
        PsTopics {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl ScalarUDFImpl for PsTopics {
    fn name(&self) -> &str {
        "ps_topics"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        ARGS.coerce_types(args)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::new_list(DataType::Float64, true))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(ARGS.model(), ARGS.model().literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = const_str(ARGS.model(), ARGS.model().scalar(&args))?;
        let model = Model::open(self.binding.client()?, &name).map_err(train_error)?;
        let lda = Lda::of(&model, self.name()).map_err(train_error)?;
        let inputs = (args.args[1..].iter())
            .map(|v| v.to_array(args.number_rows))
            .collect::<Result<Vec<_>>>()?;
        let words = (&inputs[0], inputs.get(1));
        let corpus =
            Corpus::read(self.name(), &name, words, model.spec.dim).map_err(train_error)?;
        let fixed = Fixed::pull(&model, &lda, &corpus).map_err(train_error)?;
        let lists = (0..corpus.docs()).map(|d| {
            let mixture = fixed.mixture(corpus.doc(d), lda.seed);
            Some(mixture.into_iter().map(Some).collect::<Vec<_>>())
        });
        Ok(array_result(ListArray::from_iter_primitive::<
            Float64Type,
            _,
            _,
        >(lists)))
    }

    fn documentation(&self) -> Option<&Documentation> {
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
        Some(&DOC)
    }
}
