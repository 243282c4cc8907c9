//! `ps_auc(label, score) -> Float64`: the exact area under the ROC curve (the probability
//! that a random positive scores above a random negative, ties counting half), as
//! scikit-learn's `roc_auc_score` computes it. Labels > 0 are positive.
//!
//! Partial states carry the (score, label) pairs, 16 bytes per row.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{Arg, DOC_SECTION, arity, label_type, scored};

const LABEL: Arg = Arg::new("ps_auc", 0, "label");
const SCORE: Arg = Arg::new("ps_auc", 1, "score");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsAuc {
    signature: Signature,
}

impl Default for PsAuc {
    fn default() -> Self {
        PsAuc {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for PsAuc {
    fn name(&self) -> &str {
        "ps_auc"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_auc(label, score)", args, 2..=2)?;
        Ok(vec![label_type(LABEL, &args[0])?, SCORE.number(&args[1])?])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Auc::default()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let list = DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)));
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "scores"),
                list.clone(),
                true,
            )),
            Arc::new(Field::new(
                format_state_name(args.name, "labels"),
                list,
                true,
            )),
        ])
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The exact area under the ROC curve: the probability that a random positive \
                 scores above a random negative, ties counting half, as scikit-learn's \
                 roc_auc_score computes it. Labels > 0 are positive; rows with a NULL label or \
                 score are skipped; a NaN score or a NaN or infinite label is an error. NULL \
                 when one class is missing.",
                "ps_auc(label, score)",
            )
            .with_argument("label", "The true label: a number (or a boolean).")
            .with_argument("score", "The prediction: a number, higher for positives.")
            .with_sql_example("SELECT ps_auc(label, ps_predict('a9a', idx, val)) FROM test")
            .build()
        });
        Some(&DOC)
    }
}

#[derive(Debug, Default)]
struct Auc {
    scores: Vec<f64>,
    positive: Vec<f64>,
}

/// AUC of `scores` with `positive` = 1.0 for positives, 0.0 for negatives; `None` when one
/// class is missing. Ties are found with the same total order the sort uses, so every group
/// advances (a NaN, unequal to itself, once never did).
pub fn auc(scores: &[f64], positive: &[f64]) -> Option<f64> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let (mut rank_sum, mut i) = (0.0, 0);
    while i < order.len() {
        let mut j = i;
        while j < order.len() && scores[order[j]].total_cmp(&scores[order[i]]).is_eq() {
            j += 1;
        }
        let mid_rank = (i + j + 1) as f64 / 2.0;
        rank_sum += order[i..j].iter().map(|&k| positive[k]).sum::<f64>() * mid_rank;
        i = j;
    }
    let pos = positive.iter().sum::<f64>();
    let neg = scores.len() as f64 - pos;
    (pos > 0.0 && neg > 0.0).then(|| (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg))
}

fn list(values: &[f64]) -> ScalarValue {
    let array = ListArray::from_iter_primitive::<Float64Type, _, _>([Some(
        values.iter().map(|&v| Some(v)),
    )]);
    ScalarValue::List(Arc::new(array))
}

impl Accumulator for Auc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for (label, score) in scored(LABEL, SCORE, values)? {
            self.scores.push(score);
            self.positive.push(f64::from(label > 0.0));
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![list(&self.scores), list(&self.positive)])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        for (state, dest) in states.iter().zip([&mut self.scores, &mut self.positive]) {
            let lists = state.as_list::<i32>();
            for r in (0..lists.len()).filter(|&r| lists.is_valid(r)) {
                dest.extend(lists.value(r).as_primitive::<Float64Type>().values());
            }
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(auc(&self.scores, &self.positive)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + 8 * (self.scores.capacity() + self.positive.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_matches_a_pairwise_count_with_ties() {
        let scores = [0.1, 0.4, 0.35, 0.8, 0.4, 0.7, 0.2];
        let labels = [0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0];
        let mut wins = 0.0;
        let mut pairs = 0.0;
        for i in 0..scores.len() {
            for j in 0..scores.len() {
                if labels[i] == 1.0 && labels[j] == 0.0 {
                    pairs += 1.0;
                    wins += if scores[i] > scores[j] {
                        1.0
                    } else if scores[i] == scores[j] {
                        0.5
                    } else {
                        0.0
                    };
                }
            }
        }
        assert!((auc(&scores, &labels).unwrap() - wins / pairs).abs() < 1e-12);
        assert_eq!(auc(&[0.1, 0.2], &[1.0, 1.0]), None);
        // NaN scores once kept the tie loop from advancing; they now rank as one group.
        assert_eq!(
            auc(&[f64::NAN, 0.5, f64::NAN], &[1.0, 0.0, 0.0]),
            Some(0.75)
        );
    }
}
