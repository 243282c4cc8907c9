//! `ps_recommend(model, user, k[, exclude]) -> List<Int64>`: a matrix factorization model's
//! `k` items with the highest predicted rating for the user, best first, leaving out the
//! items of `exclude` (a list of item ids: those the user rated in training, usually):
//!
//! ```sql
//! SELECT user, ps_recommend('recs', user, 10, array_agg(item)) AS top10
//! FROM train GROUP BY user;
//! ```
//!
//! Per record batch, one pull of every item's factors and of the batch's users'. The model
//! name and `k` are constants, checked at planning.

use std::sync::LazyLock;

use angel_training::Model;
use angel_training::recommend::{MAX_K, recommend};
use datafusion::arrow::array::{Array, AsArray, ListArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{
    Arg, DOC_SECTION, MODEL_DOC, arity, array_result, const_i64, const_str, integer_type,
    name_type, return_field,
};
use crate::binding::{Binding, PsBound};
use crate::bridge::train_error;

const NAME: &str = "ps_recommend";
const SYNTAX: &str = "ps_recommend(model, user, k[, exclude])";
const MODEL: Arg = Arg::new(NAME, 0, "model");
const USER: Arg = Arg::new(NAME, 1, "user");
const K: Arg = Arg::new(NAME, 2, "k");
const EXCLUDE: Arg = Arg::new(NAME, 3, "exclude");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsRecommend {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsRecommend {
    fn bind(binding: Binding) -> Self {
        PsRecommend {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl PsRecommend {
    /// `k`, a constant from 1 to [`MAX_K`].
    fn k(value: Option<&datafusion::common::ScalarValue>) -> Result<usize> {
        match const_i64(K, value)? {
            k if (1..=MAX_K as i64).contains(&k) => Ok(k as usize),
            k => K.error(&format!("a whole number from 1 to {MAX_K}"), k),
        }
    }
}

impl ScalarUDFImpl for PsRecommend {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(NAME, SYNTAX, args, 3..=4)?;
        let mut types = vec![
            name_type(MODEL, &args[0])?,
            integer_type(USER, &args[1])?,
            integer_type(K, &args[2])?,
        ];
        if let Some(t) = args.get(3) {
            let list = DataType::new_list(DataType::Int64, true);
            match t {
                DataType::Null => types.push(list),
                DataType::List(f) | DataType::LargeList(f) if f.data_type().is_integer() => {
                    types.push(list)
                }
                DataType::List(f) | DataType::LargeList(f) if f.data_type().is_null() => {
                    types.push(list)
                }
                t => return EXCLUDE.error("a list of item ids (integers)", t),
            }
        }
        Ok(types)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::new_list(DataType::Int64, true))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(MODEL, MODEL.literal(&args))?;
        Self::k(K.literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = const_str(MODEL, MODEL.scalar(&args))?;
        let k = Self::k(K.scalar(&args))?;
        let users = cast(&USER.array(&args)?, &DataType::Int64)?;
        let users = users.as_primitive::<Int64Type>();
        let exclude = match args.args.len() > 3 {
            true => Some(EXCLUDE.array(&args)?),
            false => None,
        };
        let exclude = exclude.as_ref().map(|e| e.as_list::<i32>());
        // Rows with a NULL user get NULL; the others are ranked together.
        let mut asked = Vec::new();
        for r in (0..users.len()).filter(|&r| users.is_valid(r)) {
            let Ok(user) = u64::try_from(users.value(r)) else {
                return exec_err!(
                    "{NAME}: the user of row {r} of the batch is {}; user ids run from 0",
                    users.value(r)
                );
            };
            asked.push((r, user, excluded(exclude, r)));
        }
        let model = Model::open(self.binding.client()?, &name).map_err(train_error)?;
        let subjects: Vec<u64> = asked.iter().map(|a| a.1).collect();
        let exclude: Vec<Vec<u64>> = asked.iter().map(|a| a.2.clone()).collect();
        let best = recommend(&model, NAME, &subjects, k, &exclude).map_err(train_error)?;
        let mut lists = vec![None; users.len()];
        for ((r, _, _), items) in asked.iter().zip(best) {
            lists[*r] = Some(
                items
                    .into_iter()
                    .map(|i| Some(i as i64))
                    .collect::<Vec<_>>(),
            );
        }
        Ok(array_result(ListArray::from_iter_primitive::<
            Int64Type,
            _,
            _,
        >(lists)))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "A matrix factorization model's k items with the highest predicted rating for \
                 the user, best first (ties: lower item id first), as a list of item ids, \
                 leaving out the items of exclude. Per record batch, one pull of every \
                 item's factors and of the batch's users'.",
                SYNTAX,
            )
            .with_argument("model", MODEL_DOC)
            .with_argument(
                "user",
                "The user id: an integer from 0 to the model's users - 1.",
            )
            .with_argument("k", "How many items: a constant integer from 1 to 100000.")
            .with_argument(
                "exclude",
                "Optional: item ids left out, a list of integers (usually the items the \
                 user rated in training: array_agg(item) grouped by user).",
            )
            .with_sql_example(
                "SELECT user, ps_recommend('recs', user, 10, array_agg(item)) FROM train \
                 GROUP BY user",
            )
            .with_related_udf("ps_predict")
            .build()
        });
        Some(&DOC)
    }
}

/// The item ids row `r` of `exclude` lists (NULLs and negative ids, which match no item,
/// left out).
fn excluded(exclude: Option<&ListArray>, r: usize) -> Vec<u64> {
    let Some(lists) = exclude.filter(|l| l.is_valid(r)) else {
        return Vec::new();
    };
    let items = lists.value(r);
    let items = items.as_primitive::<Int64Type>();
    (items.iter().flatten())
        .filter_map(|i| u64::try_from(i).ok())
        .collect()
}
