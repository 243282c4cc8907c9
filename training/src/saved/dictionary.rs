//! The dictionary of a saved model whose features a counter indexes: the counter rebuilt on
//! load from the saved (feature, index) pairs, and the checks that every feature keeps its
//! index and lies within the model.

use angel_client::PsClient;

use crate::error::{Result, input_err};

/// Fails when a feature of the dictionary of the model saved at `dir` lies outside its
/// dimension `dim`.
pub fn check_features(dir: &str, features: &[(String, u64)], dim: u64) -> Result<()> {
    match features.iter().find(|(_, i)| *i >= dim) {
        Some((feature, index)) => input_err(format!(
            "{dir}: feature '{feature}' has index {index}, outside the model's dim {dim}"
        )),
        None => Ok(()),
    }
}

/// Fails when `counter` indexes more features than the model saved at `at` has columns
/// (`dim`): its indices past the model would have nowhere to go.
pub async fn check_counter_size(
    client: &PsClient,
    at: &str,
    counter: &str,
    dim: u64,
) -> Result<()> {
    let size = client.counter(counter).await?.meta.size;
    if size > dim {
        return input_err(format!(
            "{at}: the model has dim {dim} but counter '{counter}' indexes {size} features"
        ));
    }
    Ok(())
}

/// Rebuilds `counter` from the saved (feature, index) pairs, or checks an existing one, and
/// fails unless every feature gets its saved index.
pub async fn restore_counter(
    client: &PsClient,
    counter: &str,
    features: &[(String, u64)],
) -> Result<()> {
    let keys: Vec<&str> = features.iter().map(|(f, _)| f.as_str()).collect();
    if client.counter(counter).await.is_err() {
        client.create_counter(counter).await?;
        client
            .counter_increase(counter, &keys, &vec![1; keys.len()])
            .await?;
        client.counter_seal(counter, 1).await?;
    }
    let found = client.counter_get(counter, &keys).await?;
    for ((feature, saved), (_, index)) in features.iter().zip(found) {
        if index != Some(*saved) {
            let index = index.map_or("no index".to_string(), |i| format!("index {i}"));
            return input_err(format!(
                "counter '{counter}' gives feature '{feature}' {index}, the saved model has index \
                 {saved}; load the model into a service without a counter of that name"
            ));
        }
    }
    Ok(())
}
