//! [`ScoredAggregate`]: an evaluation aggregate of (label, score) pairs that averages a term
//! of each pair, finished by a function (RMSE's root). `ps_logloss`, `ps_accuracy` and
//! `ps_rmse` are its instances, each in its own file with its term, documentation and tests.

use std::hash::{Hash, Hasher};

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{Arg, arity, label_type};
use crate::mean::{Mean, ScoredMean};

/// See the module documentation.
#[derive(Debug)]
pub struct ScoredAggregate {
    name: &'static str,
    /// What the second argument is (`probability`, `predicted`), as errors name it.
    score: &'static str,
    term: fn(f64, f64) -> f64,
    finish: fn(f64) -> f64,
    doc: fn() -> &'static Documentation,
    signature: Signature,
}

impl ScoredAggregate {
    /// The aggregate `name(label, score)` returning the mean of `term(label, score)`,
    /// documented by `doc`.
    pub fn new(
        name: &'static str,
        score: &'static str,
        term: fn(f64, f64) -> f64,
        doc: fn() -> &'static Documentation,
    ) -> Self {
        ScoredAggregate {
            name,
            score,
            term,
            finish: |mean| mean,
            doc,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// The same, returning `finish(mean)`.
    pub fn finished_by(self, finish: fn(f64) -> f64) -> Self {
        ScoredAggregate { finish, ..self }
    }

    /// The label and score arguments.
    fn args(&self) -> (Arg, Arg) {
        (
            Arg::new(self.name, 0, "label"),
            Arg::new(self.name, 1, self.score),
        )
    }

    /// An empty accumulator.
    pub fn mean(&self) -> ScoredMean {
        let (label, score) = self.args();
        ScoredMean::new(label, score, self.term).finished_by(self.finish)
    }
}

/// One aggregate per name: the functions it holds are its name's.
impl PartialEq for ScoredAggregate {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for ScoredAggregate {}

impl Hash for ScoredAggregate {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl AggregateUDFImpl for ScoredAggregate {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let syntax = format!("{}(label, {})", self.name, self.score);
        arity(self.name, &syntax, args, 2..=2)?;
        let (label, score) = self.args();
        Ok(vec![label_type(label, &args[0])?, score.number(&args[1])?])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(self.mean()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(Mean::state_fields(args.name))
    }

    fn documentation(&self) -> Option<&Documentation> {
        Some((self.doc)())
    }
}
