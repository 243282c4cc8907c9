//! `ps_perplexity(model, words[, counts]) -> Float64`: the perplexity of a topic model on the
//! documents it aggregates, `exp(-sum of log p(w) / tokens)`, each document's words scored
//! under its own mixture from Gibbs folding-in (`ps_topics`'s), as scikit-learn's and gensim's
//! perplexity score the documents they are given. Lower is better; a model that knew nothing
//! scores about the vocabulary's size.
//!
//! An aggregate: per record batch, one pull of the counts of its distinct words; the state is
//! the summed log-likelihood and the tokens.

use std::sync::LazyLock;

use angel_training::Model;
use angel_training::kinds::lda::Lda;
use angel_training::kinds::lda::corpus::Corpus;
use angel_training::kinds::lda::infer::Fixed;
use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{DOC_SECTION, MODEL_DOC, const_str};
use crate::binding::{Binding, PsBound};
use crate::bridge::train_error;
use crate::mean::Mean;
use crate::model_rows::ModelRows;

const ARGS: ModelRows = ModelRows::new(
    "ps_perplexity",
    "ps_perplexity(model, words[, counts])",
    false,
);

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsPerplexity {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsPerplexity {
    fn bind(binding: Binding) -> Self {
        PsPerplexity {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl AggregateUDFImpl for PsPerplexity {
    fn name(&self) -> &str {
        "ps_perplexity"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        ARGS.coerce_types(args)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Perplexity {
            binding: self.binding.clone(),
            name: const_str(ARGS.model(), ARGS.model().literal_expr(args.exprs))?,
            model: None,
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
                "A topic model's perplexity on the documents it aggregates: exp(-(sum of the \
                 log-likelihood of their words) / tokens), each document scored under its own \
                 topic mixture from Gibbs folding-in (ps_topics's). Lower is better.",
                "ps_perplexity(model, words[, counts])",
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
            .with_sql_example("SELECT ps_perplexity('topics', words, counts) FROM held_out")
            .with_related_udf("ps_topics")
            .build()
        });
        Some(&DOC)
    }
}

/// One task's documents scored.
#[derive(Debug)]
struct Perplexity {
    binding: Binding,
    name: String,
    /// The model, opened on the first rows.
    model: Option<(Model, Lda)>,
    /// Summed log-likelihood and tokens.
    mean: Mean,
}

impl Perplexity {
    fn model(&mut self) -> Result<&(Model, Lda)> {
        if self.model.is_none() {
            let model = Model::open(self.binding.client()?, &self.name).map_err(train_error)?;
            let lda = Lda::of(&model, "ps_perplexity").map_err(train_error)?;
            self.model = Some((model, lda));
        }
        Ok(self.model.as_ref().expect("opened above"))
    }
}

impl Accumulator for Perplexity {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if values.first().is_none_or(|v| v.is_empty()) {
            return Ok(());
        }
        let name = self.name.clone();
        let (model, lda) = self.model()?;
        let words = (&values[1], values.get(2));
        let corpus = Corpus::read("ps_perplexity", &name, words, model.spec.dim);
        let corpus = corpus.map_err(train_error)?;
        let fixed = Fixed::pull(model, lda, &corpus).map_err(train_error)?;
        let mut scored = Mean::default();
        for d in 0..corpus.docs() {
            let doc = corpus.doc(d);
            scored.sum += fixed.log_likelihood(doc, &fixed.mixture(doc, lda.seed));
            scored.rows += doc.len() as i64;
        }
        self.mean.sum += scored.sum;
        self.mean.rows += scored.rows;
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
        Ok(self.mean.finished_by(|mean| (-mean).exp()))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}
