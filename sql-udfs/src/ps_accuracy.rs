//! `ps_accuracy(label, predicted) -> Float64`: the share of rows whose predicted class equals
//! the label (a softmax model's `ps_predict`, say), as scikit-learn's `accuracy_score`.

use std::sync::LazyLock;

use datafusion::logical_expr::Documentation;

use crate::args::DOC_SECTION;
use crate::scored_aggregate::ScoredAggregate;

/// See the module documentation.
pub fn ps_accuracy() -> ScoredAggregate {
    ScoredAggregate::new(
        "ps_accuracy",
        "predicted",
        |label, predicted| f64::from(label == predicted),
        documentation,
    )
}

fn documentation() -> &'static Documentation {
    static DOC: LazyLock<Documentation> = LazyLock::new(|| {
        Documentation::builder(
            DOC_SECTION,
            "The share of rows whose predicted class equals the label, as scikit-learn's \
             accuracy_score. Rows with a NULL label or prediction are skipped; a NaN or \
             infinite one is an error.",
            "ps_accuracy(label, predicted)",
        )
        .with_argument("label", "The true class: a number.")
        .with_argument("predicted", "The predicted class: a number.")
        .with_sql_example("SELECT ps_accuracy(label, ps_predict('digits', idx, val)) FROM test")
        .build()
    });
    &DOC
}
