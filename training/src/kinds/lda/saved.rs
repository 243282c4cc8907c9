//! A topic model's saved format: `counts.parquet` in place of
//! `weights.parquet`, one row per word and topic with tokens of that word in that topic:
//!
//! - `feature`: the word (through the model's counter; null without one), `index`, `topic`;
//! - `count`: the word's tokens drawn into the topic, exact (Int64);
//! - `word_probability`: p(word | topic) = (count + beta) / (topic's tokens + dim x beta), the
//!   topic's word distribution, for a topic's top words;
//! - `topic_probability`: p(topic | word) = (count + beta) / (word's tokens + topics x beta),
//!   the share of the word's tokens in the topic, for a word's topics.
//!
//! `read_model` gives this table, so a saved topic model's top words are one SQL query away;
//! `LOAD MODEL` pushes the counts back (the topic totals are their sums), so `ps_topics` and
//! `ps_perplexity` give the same answers after a reload.

use std::collections::HashMap;
use std::sync::Arc;

use angel_client::PsClient;
use arrow::array::{
    Array, AsArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, UInt32Type, UInt64Type};

use super::{Lda, Priors};
use crate::error::{Result, input_err};
use crate::model::ModelSpec;
use crate::saved::dictionary::{check_counter_size, restore_counter};
use crate::saved::{ReadBack, Saved, SavedTable, TableSink, column_as};

/// Counts one pull brings (topics x words): a pull of 8 MB.
const PULL_VALUES: u64 = 1 << 20;

/// The table of a saved topic model.
pub fn table() -> SavedTable {
    SavedTable {
        name: "counts",
        file: "counts.parquet",
        schema: counts_schema(),
    }
}

/// Saves topic model `name` (`lda` of `spec`) to `sink`, its words named by `features`.
pub async fn save(
    client: &PsClient,
    name: &str,
    (lda, spec): (&Lda, &ModelSpec),
    features: &HashMap<u64, String>,
    sink: &mut dyn TableSink,
) -> Result<Saved> {
    let priors = lda.priors(spec.dim);
    sink.write(0, counts_batch(client, name, &priors, features).await?)
        .await?;
    Ok(Saved::default())
}

/// Loads the counts read back in `read` onto the service as topic model `name` (`lda` of
/// `spec`), its counter rebuilt first.
pub async fn load(
    client: &PsClient,
    name: &str,
    (lda, spec): (&Lda, &ModelSpec),
    read: &ReadBack,
) -> Result<()> {
    let table = &read.tables[0];
    let saved = read_counts(&table.path, &table.batches, &lda.priors(spec.dim))?;
    if let Some(counter) = &spec.counter {
        restore_counter(client, counter, &saved.features).await?;
        check_counter_size(client, &read.at, counter, spec.dim).await?;
    }
    spec.create(client, name).await?;
    push_counts(client, name, spec, saved).await
}

/// The columns of `counts.parquet`.
fn counts_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("feature", DataType::Utf8, true),
        Field::new("index", DataType::UInt64, false),
        Field::new("topic", DataType::UInt32, false),
        Field::new("count", DataType::Int64, false),
        Field::new("word_probability", DataType::Float64, false),
        Field::new("topic_probability", DataType::Float64, false),
    ]))
}

/// One word's tokens in one topic.
struct Count {
    index: u64,
    topic: u32,
    count: i64,
}

/// The rows of `counts.parquet` of topic model `name` (`priors`), its words named by
/// `features`: the counts pulled a run of words at a time.
async fn counts_batch(
    client: &PsClient,
    name: &str,
    priors: &Priors,
    features: &HashMap<u64, String>,
) -> Result<RecordBatch> {
    let (k, dim) = (priors.topics, priors.words);
    let rows: Vec<u64> = (0..k as u64).collect();
    let per_pull = (PULL_VALUES / k as u64).max(1);
    let mut counts = Vec::new();
    for start in (0..dim).step_by(per_pull as usize) {
        let keys: Vec<u64> = (start..(start + per_pull).min(dim)).collect();
        let values = (client.pull_at::<i64>(name, &rows, &keys, None).await)?.0;
        for (j, &index) in keys.iter().enumerate() {
            let of_word = (0..k).map(|t| (t, values[t * keys.len() + j]));
            counts.extend(of_word.filter(|(_, c)| *c != 0).map(|(t, count)| Count {
                index,
                topic: t as u32,
                count,
            }));
        }
    }
    batch(priors, &counts, features)
}

/// The rows of `counts.parquet`, with both probabilities computed from `counts`.
fn batch(p: &Priors, counts: &[Count], features: &HashMap<u64, String>) -> Result<RecordBatch> {
    let mut of_topic = vec![0i64; p.topics];
    let mut of_word: HashMap<u64, i64> = HashMap::new();
    for c in counts {
        of_topic[c.topic as usize] += c.count;
        *of_word.entry(c.index).or_default() += c.count;
    }
    let word_probability = counts.iter().map(|c| {
        (c.count as f64 + p.beta) / (of_topic[c.topic as usize] as f64 + p.words as f64 * p.beta)
    });
    let topic_probability = counts
        .iter()
        .map(|c| (c.count as f64 + p.beta) / (of_word[&c.index] as f64 + p.topics as f64 * p.beta));
    let feature: StringArray = counts.iter().map(|c| features.get(&c.index)).collect();
    Ok(RecordBatch::try_new(
        counts_schema(),
        vec![
            Arc::new(feature),
            Arc::new(UInt64Array::from_iter_values(
                counts.iter().map(|c| c.index),
            )),
            Arc::new(UInt32Array::from_iter_values(
                counts.iter().map(|c| c.topic),
            )),
            Arc::new(Int64Array::from_iter_values(counts.iter().map(|c| c.count))),
            Arc::new(Float64Array::from_iter_values(word_probability)),
            Arc::new(Float64Array::from_iter_values(topic_probability)),
        ],
    )?)
}

/// Most tokens the counts of a saved model may add up to: 2^53, so that every topic's and
/// word's total, and their sum, is exact in the doubles the likelihood is computed in.
const MAX_SAVED_TOKENS: i64 = 1 << 53;

/// What `counts.parquet` holds: per topic, its words' (index, count); the dictionary's
/// (feature, index) pairs.
struct SavedCounts {
    topics: Vec<(Vec<u64>, Vec<i64>)>,
    features: Vec<(String, u64)>,
}

/// Reads `counts.parquet` (`batches`, from `path`) of a model of `priors`, refusing what
/// would load wrong with the file and row named: a missing or mistyped column, a topic or an
/// index out of the model's range, a negative count, a (word, topic) given twice, counts
/// adding up past [`MAX_SAVED_TOKENS`].
fn read_counts(path: &str, batches: &[RecordBatch], p: &Priors) -> Result<SavedCounts> {
    let mut saved = SavedCounts {
        topics: vec![(Vec::new(), Vec::new()); p.topics],
        features: Vec::new(),
    };
    let (mut seen, mut named) = (std::collections::HashSet::new(), HashMap::new());
    let (mut row, mut tokens) = (0, 0i64);
    for batch in batches {
        let column = |n: &str, t: &DataType| column_as(path, batch, n, t);
        let feature = column("feature", &DataType::Utf8)?;
        let index = column("index", &DataType::UInt64)?;
        let topic = column("topic", &DataType::UInt32)?;
        let count = column("count", &DataType::Int64)?;
        let (feature, index) = (
            feature.as_string::<i32>(),
            index.as_primitive::<UInt64Type>(),
        );
        let (topic, count) = (
            topic.as_primitive::<UInt32Type>(),
            count.as_primitive::<Int64Type>(),
        );
        for r in 0..batch.num_rows() {
            row += 1;
            if index.is_null(r) || topic.is_null(r) || count.is_null(r) {
                return input_err(format!(
                    "{path}: row {row}: the index, topic or count is NULL"
                ));
            }
            let (i, t, c): (u64, u32, i64) = (index.value(r), topic.value(r), count.value(r));
            if i >= p.words || t as usize >= p.topics || c < 0 {
                return input_err(format!(
                    "{path}: row {row}: word {i}, topic {t}, count {c}: the model has {} words \
                     and {} topics, and counts are not negative",
                    p.words, p.topics
                ));
            }
            tokens = tokens.saturating_add(c);
            if tokens > MAX_SAVED_TOKENS {
                return input_err(format!(
                    "{path}: row {row}: the counts add up to more than {MAX_SAVED_TOKENS} \
                     tokens (2^53), past any corpus a model is trained on: the topic totals \
                     would not be exact"
                ));
            }
            if !seen.insert((i, t)) {
                return input_err(format!(
                    "{path}: row {row}: word {i} in topic {t} a second time"
                ));
            }
            if feature.is_valid(r) && named.insert(i, ()).is_none() {
                saved.features.push((feature.value(r).to_string(), i));
            }
            saved.topics[t as usize].0.push(i);
            saved.topics[t as usize].1.push(c);
        }
    }
    Ok(saved)
}

/// Pushes `saved` counts to topic model `name` (`spec`, just created), each topic's total
/// (the matrix's column `dim`) their sum.
async fn push_counts(
    client: &PsClient,
    name: &str,
    spec: &ModelSpec,
    saved: SavedCounts,
) -> Result<()> {
    for (t, (mut keys, mut counts)) in saved.topics.into_iter().enumerate() {
        let total: i64 = counts.iter().sum();
        keys.push(spec.dim);
        counts.push(total);
        client
            .push_keys::<i64>(name, t as u64, &keys, &counts)
            .await?;
    }
    Ok(())
}
