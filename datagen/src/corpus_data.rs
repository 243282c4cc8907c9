//! A generator of documents drawn from LDA's generative process with known topics, for the
//! topic model's tests and `angel-ps bench lda`: each topic is a distribution over the words
//! drawn from Dirichlet(beta), each document a mixture of topics drawn from Dirichlet(alpha),
//! and each of its tokens a topic drawn from its mixture and a word drawn from that topic.
//! Documents are written as bags of words in the LIBSVM layout (`doc word:count ...`, words
//! from 0), which `read_libsvm(path, 'index_base=0')` reads as `label, idx, val`; a share of
//! them goes to the holdout file. Same seed, same files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Gamma, weighted::WeightedIndex};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct CorpusSpec {
    /// Documents in all (train and holdout).
    pub docs: u64,
    /// Words of the vocabulary: indices 0 to words - 1.
    pub words: u64,
    /// Topics of the hidden model.
    pub topics: usize,
    /// Mean tokens per document (each has from half to one and a half times as many).
    pub doc_length: u64,
    /// The prior the documents' mixtures are drawn from.
    pub alpha: f64,
    /// The prior the topics are drawn from.
    pub beta: f64,
    /// Share of the documents written to the holdout file.
    pub holdout: f64,
}

impl CorpusSpec {
    /// A small corpus a job trains on in about a second (5 topics over 100 words, 400
    /// documents of about 60 tokens, 10% held out): what the tests run.
    pub fn small() -> Self {
        CorpusSpec {
            docs: 400,
            words: 100,
            topics: 5,
            doc_length: 60,
            alpha: 0.2,
            beta: 0.05,
            holdout: 0.1,
        }
    }
}

/// The hidden model: each topic's word distribution, and each document's mixture (train and
/// holdout documents in one numbering, as the files' labels give them).
#[derive(Debug, Clone)]
pub struct Truth {
    pub topics: Vec<Vec<f64>>,
    pub mixtures: Vec<Vec<f64>>,
    /// Documents written to the holdout file, by number.
    pub held_out: Vec<u64>,
}

/// A draw from the symmetric Dirichlet(`prior`) over `n` outcomes.
fn dirichlet(rng: &mut StdRng, prior: f64, n: usize) -> Vec<f64> {
    let gamma = Gamma::new(prior, 1.0).expect("a prior above 0");
    let draws: Vec<f64> = (0..n).map(|_| gamma.sample(rng)).collect();
    let sum: f64 = draws.iter().sum();
    match sum > 0.0 {
        true => draws.iter().map(|d| d / sum).collect(),
        false => vec![1.0 / n as f64; n],
    }
}

/// Writes `spec`'s documents to `train` and `holdout`; returns the hidden model.
pub fn generate(
    train: &Path,
    holdout: &Path,
    spec: &CorpusSpec,
    seed: u64,
) -> std::io::Result<Truth> {
    let mut rng = StdRng::seed_from_u64(seed);
    let topics: Vec<Vec<f64>> = (0..spec.topics)
        .map(|_| dirichlet(&mut rng, spec.beta, spec.words as usize))
        .collect();
    let pick_word: Vec<WeightedIndex<f64>> = (topics.iter())
        .map(|t| WeightedIndex::new(t).expect("a distribution"))
        .collect();
    let open = |path: &Path| File::create(path).map(|f| BufWriter::with_capacity(1 << 20, f));
    let (mut to_train, mut to_holdout) = (open(train)?, open(holdout)?);
    let mut truth = Truth {
        topics,
        mixtures: Vec::with_capacity(spec.docs as usize),
        held_out: Vec::new(),
    };
    for d in 0..spec.docs {
        let mixture = dirichlet(&mut rng, spec.alpha, spec.topics);
        let pick_topic = WeightedIndex::new(&mixture).expect("a distribution");
        let length = rng.random_range(spec.doc_length.div_ceil(2)..=spec.doc_length * 3 / 2);
        let mut bag = BTreeMap::<usize, u32>::new();
        for _ in 0..length {
            let topic = pick_topic.sample(&mut rng);
            *bag.entry(pick_word[topic].sample(&mut rng)).or_default() += 1;
        }
        let out = match rng.random::<f64>() < spec.holdout {
            true => {
                truth.held_out.push(d);
                &mut to_holdout
            }
            false => &mut to_train,
        };
        write!(out, "{d}")?;
        for (word, count) in bag {
            write!(out, " {word}:{count}")?;
        }
        writeln!(out)?;
        truth.mixtures.push(mixture);
    }
    to_train.flush()?;
    to_holdout.flush()?;
    Ok(truth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_follow_their_topics_and_the_same_seed_gives_the_same_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = |f: &str| dir.path().join(f);
        let spec = CorpusSpec::small();
        let truth = generate(&path("a"), &path("a.test"), &spec, 4).unwrap();
        generate(&path("b"), &path("b.test"), &spec, 4).unwrap();
        let a = std::fs::read_to_string(path("a")).unwrap();
        assert_eq!(a, std::fs::read_to_string(path("b")).unwrap());
        let lines = a.lines().count() as u64;
        let held = std::fs::read_to_string(path("a.test"))
            .unwrap()
            .lines()
            .count() as u64;
        assert_eq!(
            (lines + held, held),
            (spec.docs, truth.held_out.len() as u64)
        );
        assert!((20..60).contains(&held), "about 10% held out: {held}");
        // Word frequencies over the corpus follow the mixture of topics within sampling error.
        let mut seen = vec![0.0; spec.words as usize];
        let mut tokens = 0.0;
        for line in a.lines() {
            for pair in line.split(' ').skip(1) {
                let (w, c) = pair.split_once(':').unwrap();
                let c: f64 = c.parse().unwrap();
                seen[w.parse::<usize>().unwrap()] += c;
                tokens += c;
            }
        }
        let first = a.lines().next().unwrap();
        assert!(
            first.starts_with("0 ") || truth.held_out.contains(&0),
            "{first}"
        );
        let top = (0..spec.words as usize)
            .max_by(|&x, &y| seen[x].total_cmp(&seen[y]))
            .unwrap();
        let expected: f64 = (truth.mixtures.iter())
            .map(|m| {
                (0..spec.topics)
                    .map(|k| m[k] * truth.topics[k][top])
                    .sum::<f64>()
            })
            .sum::<f64>()
            / spec.docs as f64;
        let share = seen[top] / tokens;
        assert!(
            (share - expected).abs() < 0.3 * expected,
            "{share} vs {expected}"
        );
    }
}
