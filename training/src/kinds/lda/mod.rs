//! The topic model: latent Dirichlet allocation trained by collapsed Gibbs sampling, as Angel,
//! FlexPS and Harp train it on a parameter server. A document is a bag of word indices
//! (`0..dim`, a vocabulary); each of its tokens has a topic, and the model is the counts those
//! assignments make: per word and topic `n_wk`, per topic `n_k`.
//!
//! The counts live on the PS as one integer matrix of `topics` rows: column `w` holds word
//! `w`'s counts (sparse storage: a word's topics without tokens take no room), and column
//! `dim` (the other kinds' intercept) the topic totals. The assignments and each document's
//! counts stay with the worker that holds the document for the whole statement ([`task`]);
//! where a job reads its rows anew every round, the assignments are kept on the servers
//! between rounds ([`stored`]).
//!
//! - [`corpus`]: a worker's documents read from `words [, counts]` columns;
//! - [`sampler`]: SparseLDA's draw of a token's topic;
//! - [`worker`]: a worker's tokens in sampling order, their topics, and one pass over them;
//! - [`likelihood`]: the joint log-likelihood log p(w, z) the epoch table reports;
//! - [`infer`]: a new document's topics under the trained model (`ps_topics`);
//! - [`stored`]: the workers' token topics on the servers, for jobs that read their rows anew
//!   every round (Ballista);
//! - [`task`]: a worker's pass in a statement (`ps_train`);
//! - [`driver`]: the statement's rounds and the epoch table;
//! - [`saved`]: its saved format, `counts.parquet`.

pub mod corpus;
pub mod driver;
pub mod infer;
pub mod likelihood;
pub mod sampler;
pub mod saved;
pub mod stored;
pub mod task;
pub mod worker;

use std::collections::HashMap;

use angel_client::{MatrixSpec, PsClient};
use arrow::array::RecordBatch;

use crate::error::{Result, option_err};
use crate::kinds::{Gradient, Inputs};
use crate::model::{Engine, Model, ModelKind, ModelSpec, Trains};
use crate::options::OptionValue;
use crate::saved::{ReadBack, Saved, SavedTable, TableSink};
use crate::task_pass::{TaskContext, TaskPass};

/// Most topics a model may have.
pub const MAX_TOPICS: u64 = 1 << 16;

/// See the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Lda {
    /// Number of topics (option `topics`); 0 until set.
    pub topics: usize,
    /// The documents' Dirichlet prior on topics (option `alpha`).
    pub alpha: f64,
    /// The topics' Dirichlet prior on words (option `beta`).
    pub beta: f64,
    /// Seed of the random topics and draws (option `seed`), so a job samples the same chain at
    /// every run.
    pub seed: u64,
}

impl Default for Lda {
    /// The priors of the `lda` package (alpha 0.1, beta 0.01).
    fn default() -> Self {
        Lda {
            topics: 0,
            alpha: 0.1,
            beta: 0.01,
            seed: 1,
        }
    }
}

#[async_trait::async_trait]
impl ModelKind for Lda {
    fn name(&self) -> &'static str {
        "lda"
    }

    fn loss_name(&self) -> &'static str {
        "log-likelihood"
    }

    fn set(&mut self, option: &OptionValue) -> Result<bool> {
        let positive = |o: &OptionValue| o.number(|x| x > 0.0, "a finite number above 0");
        match option.key.to_ascii_lowercase().as_str() {
            "topics" => self.topics = option.whole(2, MAX_TOPICS)? as usize,
            "alpha" => self.alpha = positive(option)?,
            "beta" => self.beta = positive(option)?,
            "seed" => self.seed = option.whole(0, u64::MAX)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        vec![
            ("topics", self.topics.to_string()),
            ("alpha", self.alpha.to_string()),
            ("beta", self.beta.to_string()),
            ("seed", self.seed.to_string()),
        ]
    }

    fn check(&self) -> Result<()> {
        match self.topics {
            0 => option_err(
                "an lda model needs the option topics (the number of topics, from 2 to 65536)",
            ),
            _ => Ok(()),
        }
    }

    fn weight_rows(&self) -> usize {
        self.topics
    }

    fn inputs(&self) -> Inputs {
        Inputs::Documents
    }

    /// Its samplers rotate the vocabulary: no optimizer is involved.
    fn optimizer_free(&self) -> bool {
        true
    }

    /// The topic model's counts: `rows` (its topics) of whole numbers, a column per word of
    /// a vocabulary of `dim` words and one for the topic totals, stored sparsely (a word's
    /// topics without tokens take no room: a dense word-topic matrix is what runs Angel's
    /// LDA out of memory).
    fn matrix(&self, name: &str, rows: u64, dim: u64) -> Result<MatrixSpec> {
        if dim > u64::from(u32::MAX) {
            return option_err(format!(
                "model '{name}': a topic model's vocabulary has at most {} words, got dim = \
                 {dim}",
                u32::MAX
            ));
        }
        Ok(MatrixSpec::sparse(name, rows, dim + 1).value_type(angel_client::ValueType::I64))
    }

    fn refuses_more_epochs(&self) -> Option<&'static str> {
        Some(
            "a topic model's token topics live only for the statement that samples them; \
             train it for more epochs with CREATE OR REPLACE MODEL",
        )
    }

    fn keeps_rows_by_id(&self) -> bool {
        true
    }

    fn companions(&self, model: &str) -> Vec<String> {
        vec![stored::StoredTopics::name_of(model)]
    }

    fn answers_instead(&self) -> &'static str {
        " and predicts no label; ps_topics infers a document's topics"
    }
}

#[async_trait::async_trait]
impl Trains for Lda {
    fn gradient(&self) -> Option<&dyn Gradient> {
        None
    }

    fn open_pass(&self, model: Model, context: &TaskContext) -> Result<Box<dyn TaskPass>> {
        let task = task::TopicTask::new(model, self.clone(), context);
        Ok(Box::new(task))
    }

    async fn drive(&self, engine: &dyn Engine) -> Result<RecordBatch> {
        driver::train(engine, self).await
    }

    fn saved_tables(&self) -> Vec<SavedTable> {
        vec![saved::table()]
    }

    async fn save(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        features: &HashMap<u64, String>,
        sink: &mut dyn TableSink,
    ) -> Result<Saved> {
        saved::save(client, name, (self, spec), features, sink).await
    }

    async fn load(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        read: &ReadBack,
    ) -> Result<()> {
        saved::load(client, name, (self, spec), read).await
    }
}

/// The priors of a model of `topics` topics over `words` words, as the sampler and the
/// likelihood use them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Priors {
    pub topics: usize,
    pub words: u64,
    pub alpha: f64,
    pub beta: f64,
}

impl Lda {
    /// The topic model options of `model`, which `function` uses; an error naming both when
    /// the model is of another kind.
    pub fn of(model: &Model, function: &str) -> Result<Lda> {
        let wanted = "a topic model (kind = 'lda')";
        (model.spec.kind.own().cloned()).map_or_else(|| model.refuse(function, wanted), Ok)
    }

    /// Its priors over a vocabulary of `words` words.
    pub fn priors(&self, words: u64) -> Priors {
        Priors {
            topics: self.topics,
            words,
            alpha: self.alpha,
            beta: self.beta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_and_give_one_row_per_topic() {
        let mut lda = Lda::default();
        let err = lda.check().unwrap_err().to_string();
        assert!(err.contains("option topics"), "{err}");
        for (key, value) in [("topics", "7"), ("alpha", "0.5"), ("beta", "0.1")] {
            assert!(lda.set(&OptionValue { key, value }).unwrap());
        }
        assert_eq!((lda.weight_rows(), lda.alpha, lda.beta), (7, 0.5, 0.1));
        let err = (lda.set(&OptionValue {
            key: "topics",
            value: "1",
        }))
        .unwrap_err()
        .to_string();
        assert!(err.contains("topics = '1'"), "{err}");
        assert!(
            !lda.set(&OptionValue {
                key: "rank",
                value: "3"
            })
            .unwrap()
        );
    }
}
