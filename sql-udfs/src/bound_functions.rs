//! The PS-bound SQL functions, listed once: [`crate::register_all`] builds them for a job,
//! and the Ballista codecs ([`crate::ballista::codec`]) read a function's master back or
//! rebuild a function by name from this same list.

use datafusion::logical_expr::{AggregateUDF, AggregateUDFImpl, ScalarUDF, ScalarUDFImpl};

use crate::binding::{Binding, PsBound};
use crate::{
    ps_counter_add, ps_counter_clean, ps_counter_seal, ps_distance, ps_index, ps_loss,
    ps_perplexity, ps_predict, ps_predict_proba, ps_recommend, ps_topics, ps_train,
};

/// One PS-bound function of kind `U` (scalar or aggregate): how to build it for a binding,
/// and how to read the binding of a function if it is this one.
pub struct Bound<U> {
    /// Builds the function.
    pub make: fn(Binding) -> U,
    /// The binding of `f` if `f` is this function.
    pub binding: fn(&U) -> Option<&Binding>,
}

fn scalar<T: ScalarUDFImpl + PsBound + 'static>() -> Bound<ScalarUDF> {
    fn binding<T: ScalarUDFImpl + PsBound + 'static>(f: &ScalarUDF) -> Option<&Binding> {
        f.inner().downcast_ref::<T>().map(T::binding)
    }
    Bound {
        make: |b| ScalarUDF::new_from_impl(T::bind(b)),
        binding: binding::<T>,
    }
}

fn aggregate<T: AggregateUDFImpl + PsBound + 'static>() -> Bound<AggregateUDF> {
    fn binding<T: AggregateUDFImpl + PsBound + 'static>(f: &AggregateUDF) -> Option<&Binding> {
        f.inner().downcast_ref::<T>().map(T::binding)
    }
    Bound {
        make: |b| AggregateUDF::new_from_impl(T::bind(b)),
        binding: binding::<T>,
    }
}

/// The PS-bound scalar functions.
pub fn scalars() -> [Bound<ScalarUDF>; 9] {
    [
        scalar::<ps_counter_seal::PsCounterSeal>(),
        scalar::<ps_counter_clean::PsCounterClean>(),
        scalar::<ps_index::PsIndex>(),
        scalar::<ps_predict::PsPredict>(),
        scalar::<ps_predict_proba::PsPredictProba>(),
        scalar::<ps_recommend::PsRecommend>(),
        scalar::<ps_loss::PsLoss>(),
        scalar::<ps_topics::PsTopics>(),
        scalar::<ps_distance::PsDistance>(),
    ]
}

/// The PS-bound aggregate functions.
pub fn aggregates() -> [Bound<AggregateUDF>; 3] {
    [
        aggregate::<ps_counter_add::PsCounterAdd>(),
        aggregate::<ps_train::PsTrain>(),
        aggregate::<ps_perplexity::PsPerplexity>(),
    ]
}
