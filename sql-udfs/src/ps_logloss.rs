//! `ps_logloss(label, probability) -> Float64`: mean log loss, with probabilities clipped to
//! [1e-15, 1 - 1e-15] as scikit-learn does. Labels > 0 are positive.

use std::sync::LazyLock;

use datafusion::logical_expr::Documentation;

use crate::args::DOC_SECTION;
use crate::scored_aggregate::ScoredAggregate;

/// See the module documentation.
pub fn ps_logloss() -> ScoredAggregate {
    ScoredAggregate::new("ps_logloss", "probability", log_loss, documentation)
}

/// The log loss of one row: of `p` for a positive label, of `1 - p` otherwise.
fn log_loss(label: f64, p: f64) -> f64 {
    let p = p.clamp(1e-15, 1.0 - 1e-15);
    -if label > 0.0 { p.ln() } else { (1.0 - p).ln() }
}

fn documentation() -> &'static Documentation {
    static DOC: LazyLock<Documentation> = LazyLock::new(|| {
        Documentation::builder(
            DOC_SECTION,
            "Mean log loss of predicted probabilities, clipped to [1e-15, 1 - 1e-15] as \
             scikit-learn does. Labels > 0 are positive; rows with a NULL label or \
             probability are skipped; a NaN probability or a NaN or infinite label is an \
             error.",
            "ps_logloss(label, probability)",
        )
        .with_argument("label", "The true label: a number (or a boolean).")
        .with_argument(
            "probability",
            "The predicted probability of the positive class: a number.",
        )
        .with_sql_example("SELECT ps_logloss(label, ps_predict('a9a', idx, val)) FROM test")
        .build()
    });
    &DOC
}
