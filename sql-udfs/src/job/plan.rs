//! Reading a [`Plan`], what `CREATE MODEL` asks for: the model's spec and the run's own
//! options (`epochs`, `holdout`), read and checked before anything is created.

use std::collections::HashMap;

use angel_client::{CounterState, PsError};
use angel_training::ModelSpec;
use angel_training::Plan;
use angel_training::registry;
use datafusion::common::{Result, plan_err};
use datafusion::prelude::SessionContext;

use crate::binding::Binding;
use crate::bridge::{ps_error, train_error};

/// Reads the options: model options go to the spec, `epochs` and `holdout` drive training;
/// `counter` (without `dim`) sizes the model from the sealed counter.
pub(super) async fn plan(binding: &Binding, options: &[(String, String)]) -> Result<Plan> {
    let kind = options
        .iter()
        .find(|(k, _)| k == "kind")
        .map_or("logistic", |(_, v)| v.as_str());
    let kind = registry::by_name(kind).map_err(train_error)?;
    let mut plan = Plan::new(ModelSpec::new(kind, 0), 5);
    let mut given: HashMap<String, &str> = HashMap::new();
    for (key, value) in options {
        // A kind's own option may share an alias's name (the topic model's prior alpha).
        let key_lower = key.to_ascii_lowercase();
        let setting = match plan.spec.kind.gradient() {
            Some(_) => ModelSpec::setting(&key_lower),
            None => &key_lower,
        };
        if let Some(first) = given.insert(setting.to_string(), key) {
            return plan_err!(
                "model options '{first}' and '{key}' both set {setting}; give one of them"
            );
        }
        if !plan.run_option(key, value).map_err(train_error)? {
            plan.spec.set(key, value).map_err(train_error)?;
        }
    }
    // A full-batch solver's and k-means's epochs are iterations that end on a tolerance: at
    // most 100 unless said (as Spark MLlib's solvers and scikit-learn's).
    let iterative = plan.spec.solver.method.is_some() || plan.spec.kind.converges();
    if iterative && !options.iter().any(|(k, _)| k == "epochs") {
        plan.epochs = 100;
    }
    for (option, named, counter) in plan.spec.kind.counted_options() {
        let size = sealed_size(binding, (named, &counter)).await?;
        plan.spec
            .set(option, &size.to_string())
            .map_err(train_error)?;
    }
    if let Some(counter) = plan.spec.counter.clone() {
        let size = sealed_size(binding, ("counter", &counter)).await?;
        match plan.spec.dim {
            0 => plan.spec.dim = size,
            dim if dim < size => {
                return plan_err!(
                    "CREATE MODEL: dim = {dim} is below the {size} features counter '{counter}' \
                     indexed; leave dim out to take it from the counter"
                );
            }
            _ => {}
        }
    }
    if plan.spec.dim == 0 {
        plan.spec.kind.check().map_err(train_error)?;
        return plan_err!(
            "CREATE MODEL needs the option dim (number of features) or counter (a sealed counter)"
        );
    }
    Ok(plan)
}

/// The number of keys sealed counter `counter` (named by model option `option`) indexed; an
/// error saying what to do when it is missing, not sealed, or indexed nothing.
async fn sealed_size(binding: &Binding, (option, counter): (&str, &str)) -> Result<u64> {
    let client = binding.client()?;
    client.refresh().await.map_err(ps_error)?;
    let meta = match client.counter(counter).await {
        Ok(c) => c.meta.clone(),
        Err(PsError::NotFound(_)) => {
            return plan_err!(
                "CREATE MODEL option {option} = '{counter}': no counter of that name; create and \
                 fill it with ps_counter_add, then seal it with ps_counter_seal"
            );
        }
        Err(e) => return Err(ps_error(e)),
    };
    if meta.state != CounterState::Read as i32 {
        return plan_err!(
            "CREATE MODEL option {option} = '{counter}': the counter is not sealed; seal it with \
             ps_counter_seal first"
        );
    }
    if meta.size == 0 {
        return plan_err!(
            "CREATE MODEL option {option} = '{counter}': the counter is sealed but indexed no \
             key (no key was counted min_count = {} times or more)",
            meta.min_count
        );
    }
    Ok(meta.size)
}

/// Checks that the `holdout` option names a table this job can read.
pub(super) async fn check_holdout(ctx: &SessionContext, holdout: &str) -> Result<()> {
    match ctx.sql(&format!("SELECT * FROM {holdout} LIMIT 0")).await {
        Ok(_) => Ok(()),
        Err(e) => plan_err!("option holdout = '{holdout}': {e}"),
    }
}
