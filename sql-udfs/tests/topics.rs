//! The topic model (`kind = 'lda'`) on a real in-process service: one worker against its
//! sampler's chain run without a service, its counts on the servers against its workers'
//! topics, recovery of a generated corpus's topics, and its refusals.

mod common;

use std::sync::Arc;

use angel_client::PsClient;
use angel_client::task_change::TaskRun;
use angel_datagen::corpus_data::{self, CorpusSpec, Truth};
use angel_ps_service::{Standalone, StandaloneConfig};
use angel_sql::job::Job;
use angel_training::kept::Kept;
use angel_training::key_lists::KeyLists;
use angel_training::kinds::lda::Lda;
use angel_training::kinds::lda::corpus::Corpus as TopicCorpus;
use angel_training::kinds::lda::likelihood;
use angel_training::kinds::lda::stored::StoredTopics;
use angel_training::kinds::lda::task::TopicTask;
use angel_training::kinds::lda::worker::TopicWorker;
use angel_training::registry;
use angel_training::{Model, ModelSpec, TaskContext};
use common::{column, leases};
use datafusion::arrow::array::{ArrayRef, AsArray, Float64Builder, ListBuilder, UInt64Builder};
use datafusion::arrow::datatypes::{Float64Type, Int64Type, UInt32Type, UInt64Type};
use datafusion::prelude::{SessionConfig, SessionContext};

/// The generated corpus, its documents as token lists (as the job reads them), and the files.
struct Corpus {
    truth: Truth,
    docs: Vec<Vec<u32>>,
    _dir: tempfile::TempDir,
    train: std::path::PathBuf,
    test: std::path::PathBuf,
}

fn corpus(spec: &CorpusSpec, seed: u64) -> Corpus {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train.txt"), dir.path().join("test.txt"));
    let truth = corpus_data::generate(&train, &test, spec, seed).unwrap();
    let docs = (std::fs::read_to_string(&train).unwrap().lines())
        .map(|line| {
            let pairs = line.split(' ').skip(1).map(|p| p.split_once(':').unwrap());
            pairs
                .flat_map(|(w, c)| std::iter::repeat_n(w.parse().unwrap(), c.parse().unwrap()))
                .collect()
        })
        .collect();
    Corpus {
        truth,
        docs,
        _dir: dir,
        train,
        test,
    }
}

/// A job over `corpus` as table `corpus (doc, words, counts)`, in `partitions` partitions,
/// with a service of two servers.
async fn corpus_job(corpus: &Corpus, partitions: usize) -> (Standalone, Job) {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let config = SessionConfig::new().with_target_partitions(partitions);
    let job = Job::new(
        SessionContext::new_with_config(config),
        &service.master_addr(),
    );
    let sql = format!(
        "CREATE TABLE corpus AS SELECT label AS doc, idx AS words, val AS counts FROM \
         read_libsvm('{}', 'index_base=0')",
        corpus.train.display()
    );
    job.execute(&sql).await.unwrap();
    let held = format!(
        "CREATE TABLE held AS SELECT label AS doc, idx AS words, val AS counts FROM \
         read_libsvm('{}', 'index_base=0')",
        corpus.test.display()
    );
    job.execute(&held).await.unwrap();
    (service, job)
}

/// `CREATE OR REPLACE MODEL topics` of the small corpus's shape with `options`.
fn create(options: &str) -> String {
    let spec = CorpusSpec::small();
    format!(
        "CREATE OR REPLACE MODEL topics OPTIONS (kind = 'lda', topics = {}, dim = {}, alpha = \
         0.1, beta = 0.01, {options}) AS SELECT doc, words, counts FROM corpus",
        spec.topics, spec.words
    )
}

/// Every count of model `name` (topic after topic: the words, then the totals).
async fn counts(master: &str, name: &str) -> Vec<i64> {
    let spec = CorpusSpec::small();
    let client = PsClient::connect(master).await.unwrap();
    let rows: Vec<u64> = (0..spec.topics as u64).collect();
    let keys: Vec<u64> = (0..=spec.words).collect();
    client
        .pull_at::<i64>(name, &rows, &keys, None)
        .await
        .unwrap()
        .0
}

/// The same worker's chain run here without a service (its vocabulary cut for `rotated`
/// rotated slices, 0: none; each sweep's slices in the order `order` gives): its counts kept
/// by adding each step's change, as the servers add them; the log-likelihood after the start
/// and each sweep.
fn local_chain(
    docs: &[ArrayRef],
    (lda, rotated): (&Lda, usize),
    sweeps: usize,
    order: impl Fn(usize, &mut TopicWorker) -> Vec<usize>,
) -> Vec<f64> {
    let spec = CorpusSpec::small();
    let corpus = TopicCorpus::read("test", "local", (&docs[0], docs.get(1)), spec.words).unwrap();
    let mut worker = TopicWorker::for_model(lda, spec.words, &corpus, rotated);
    let p = lda.priors(spec.words);
    let mut totals: Vec<i64> = vec![0; lda.topics];
    for s in 0..worker.slices.len() {
        totals
            .iter_mut()
            .zip(worker.counts(s).0)
            .for_each(|(a, b)| *a += b);
    }
    let joint = |t: &[i64], w: &[i64], worker: &TopicWorker| {
        likelihood::totals(&p, t)
            + likelihood::words(&p, w.iter().copied())
            + worker.doc_likelihood()
    };
    // The counts of every slice, as the servers hold them: (totals, each slice's words).
    let slices = worker.slices.len();
    let mut words: Vec<Vec<i64>> = (0..slices).map(|s| worker.counts(s).1).collect();
    let all = |words: &[Vec<i64>]| words.concat();
    let mut trajectory = vec![joint(&totals, &all(&words), &worker)];
    for sweep in 0..sweeps {
        for s in order(sweep, &mut worker) {
            let (dt, dw) = worker.sample(s, &totals, &words[s]);
            totals.iter_mut().zip(dt).for_each(|(a, b)| *a += b);
            words[s].iter_mut().zip(dw).for_each(|(a, b)| *a += b);
        }
        trajectory.push(joint(&totals, &all(&words), &worker));
    }
    trajectory
}

/// One SQL worker is the worker's sequential chain, in both parallel modes: for two seeds
/// each, the epoch table's log-likelihood (words' part summed on the servers, documents' part
/// by the worker) equals, after the start and each sweep, that of the same chain run here
/// without a service, within 1e-9 (the sums' order differs). Under rotation the local chain
/// walks the rotated slices in the order the master's lease record shows. So pulls, pushes,
/// the pipelined next pull (and lease), the topic totals carried between pulls and the state
/// kept between rounds change nothing; the chain itself is collapsed Gibbs sampling in
/// distribution (`angel_training`'s worker tests compare it with a plain sampler).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_is_the_sequential_chain_of_its_sampler() {
    let spec = CorpusSpec::small();
    let corpus = corpus(&spec, 11);
    let (service, job) = corpus_job(&corpus, 1).await;
    let sweeps = 6;
    let docs = documents(&corpus.docs);
    for (parallelism, seed) in [("data", 1), ("data", 2), ("rotation", 1), ("rotation", 3)] {
        let options =
            format!("epochs = {sweeps}, workers = 1, seed = {seed}, parallelism = '{parallelism}'");
        let table = job.execute(&create(&options)).await.unwrap();
        let ours = column(&table[0], "log_likelihood");
        let lda = Lda {
            topics: spec.topics,
            seed,
            ..Default::default()
        };
        let local = match parallelism {
            "data" => local_chain(&docs, (&lda, 0), sweeps, |_, w| w.round_order()),
            _ => {
                // The statement's rounds are the master's last ones: one lease per step.
                let leases = leases(&service.master_addr()).await;
                let rounds: Vec<Vec<usize>> = (leases.chunks(2).skip(leases.len() / 2 - sweeps))
                    .map(|round| round.iter().map(|l| l.slice as usize).collect())
                    .collect();
                local_chain(&docs, (&lda, 2), sweeps, |sweep, w| {
                    rounds[sweep]
                        .iter()
                        .flat_map(|&r| w.step_order(r))
                        .collect()
                })
            }
        };
        for (e, (a, b)) in ours.iter().zip(&local).enumerate() {
            assert!(
                (a - b).abs() < 1e-9 * b.abs(),
                "{parallelism} seed {seed} sweep {e}: {a} vs {b}"
            );
        }
        assert!(ours[sweeps] > ours[0] + 1000.0, "{ours:?}");
        // Without time control every token is drawn every round, and counted once.
        let (rate, seconds) = (
            column(&table[0], "tokens_per_second"),
            column(&table[0], "seconds"),
        );
        let tokens = column(&table[0], "tokens");
        for e in 0..=sweeps {
            let drawn = rate[e] * seconds[e];
            assert!(
                (drawn - tokens[e]).abs() < 1e-6 * tokens[e],
                "round {e}: {drawn} drawn"
            );
        }
    }
    let n = counts(&service.master_addr(), "topics").await;
    let width = spec.words as usize + 1;
    let tokens: i64 = corpus.docs.iter().map(|d| d.len() as i64).sum();
    let totals: i64 = (0..spec.topics).map(|t| n[t * width + width - 1]).sum();
    assert_eq!(totals, tokens);
}

/// The counts on the servers are the sum of the workers' tokens' topics after every round
/// (three workers, three epochs, counted word by word and topic by topic): nothing lost or
/// doubled, in both parallel modes. Under rotation the lease record shows no rotated slice
/// held by two workers at once, every slice meeting every worker once a round, and every
/// token drawn once a round. The workers run here as `ps_train` runs them, one thread each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_on_the_servers_are_the_workers_topics_after_every_round() {
    let spec = CorpusSpec::small();
    let corpus = corpus(&spec, 5);
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let client = PsClient::connect(&service.master_addr()).await.unwrap();
    let parts: Vec<Vec<ArrayRef>> = (corpus.docs.chunks(corpus.docs.len().div_ceil(3)))
        .map(documents)
        .collect();
    let tokens: u64 = corpus.docs.iter().map(|d| d.len() as u64).sum();
    for parallelism in ["data", "rotation"] {
        let name = format!("topics_{parallelism}");
        three_worker_model(&client, &name, parallelism).await;
        let kept = Kept::default();
        kept.enable(&name);
        for round in 0..=3 {
            kept.start_round(&name, round);
            let runs: Vec<_> = (parts.iter().cloned())
                .map(|arrays| {
                    let (kept, client, name) = (kept.clone(), client.clone(), name.clone());
                    std::thread::spawn(move || {
                        let model = Model::open(client, &name).unwrap();
                        let mut task = topic_task(model, &kept);
                        task.add(&arrays);
                        task.run(|_, _| {}).unwrap()
                    })
                })
                .collect();
            let done: u64 = runs.into_iter().map(|r| r.join().unwrap().tokens).sum();
            assert_eq!(done, tokens);
            let width = spec.words as usize + 1;
            let mut expected = vec![0i64; spec.topics * width];
            for arrays in &parts {
                let data: Vec<_> = arrays.iter().map(|a| a.to_data()).collect();
                let worker = kept
                    .take::<TopicWorker>(&name, &data)
                    .expect("each worker's state is kept");
                for (w, &t) in worker.words().zip(&worker.topics) {
                    expected[t as usize * width + w as usize] += 1;
                    expected[t as usize * width + width - 1] += 1;
                }
                kept.put(&name, round, data, worker);
            }
            let on_servers = counts(&service.master_addr(), &name).await;
            assert_eq!(on_servers, expected, "{parallelism}, round {round}");
        }
    }
    let leases = leases(&service.master_addr()).await;
    assert_eq!(leases.len(), 3 * 3 * 6, "rounds x workers x slices");
    for a in &leases {
        for b in &leases {
            let overlap = a.start_us < b.end_us && b.start_us < a.end_us;
            let shared = (a.round, a.slice) == (b.round, b.slice);
            assert!(!(shared && a.rank != b.rank && overlap), "{a:?} and {b:?}");
        }
    }
    for round in 1..=3 {
        let of_round: Vec<_> = leases.iter().filter(|l| l.round == round).collect();
        let drawn: u64 = of_round.iter().map(|l| l.rows).sum();
        assert_eq!(drawn, tokens, "round {round}: every token drawn once");
        let visits: std::collections::HashSet<(u32, u32)> =
            of_round.iter().map(|l| (l.slice, l.rank)).collect();
        assert_eq!(
            visits.len(),
            18,
            "round {round}: every slice met every worker"
        );
    }
}

/// Workers that keep nothing from round to round (on Ballista, each round's tasks are new and
/// their documents come in another order) keep their tokens' topics on the servers: after
/// every round, in both parallel modes, the counts on the servers are what the topics stored
/// for each worker's documents make, and every token was drawn; a task of round 0 run again
/// changes nothing, and a worker given other documents than in round 0 is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_that_keep_nothing_find_their_tokens_topics_on_the_servers() {
    let spec = CorpusSpec::small();
    let corpus = corpus(&spec, 5);
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let client = PsClient::connect(&service.master_addr()).await.unwrap();
    let parts: Vec<Vec<Vec<u32>>> = (corpus.docs.chunks(corpus.docs.len().div_ceil(3)))
        .map(<[Vec<u32>]>::to_vec)
        .collect();
    let tokens: u64 = corpus.docs.iter().map(|d| d.len() as u64).sum();
    for parallelism in ["data", "rotation"] {
        let name = format!("stored_{parallelism}");
        three_worker_model(&client, &name, parallelism).await;
        let stored = StoredTopics::of(client.clone(), &name);
        stored.create().await.unwrap();
        for round in 0..=3 {
            stored.start_round(round).await.unwrap();
            let task = |docs: Vec<Vec<u32>>, part: u64| {
                let (client, name) = (client.clone(), name.clone());
                std::thread::spawn(move || {
                    let model = Model::open(client, &name).unwrap();
                    let mut task = topic_task(model, &Kept::default());
                    task.add(&documents(&docs));
                    // Named as a Ballista task's pushes are (run, partition).
                    TaskRun::new(&[u64::from(round), part]).scope(|| task.run(|_, _| {}))
                })
            };
            let runs: Vec<_> = (parts.iter().cloned().zip(0..))
                .map(|(mut docs, part)| {
                    // New arrays every round, the documents in another order.
                    if round % 2 == 1 {
                        docs.reverse();
                    }
                    task(docs, part)
                })
                .collect();
            let done: u64 = runs
                .into_iter()
                .map(|r| r.join().unwrap().unwrap().tokens)
                .sum();
            assert_eq!(done, tokens);
            if round == 0 {
                // A task run again: the servers refuse what its first run pushed.
                task(parts[0].clone(), 0).join().unwrap().unwrap();
            }
            let width = spec.words as usize + 1;
            let mut expected = vec![0i64; spec.topics * width];
            let model = Model::open(client.clone(), &name).unwrap();
            let lda = Lda::of(&model, "test").unwrap();
            let rotated = model.spec.sync.to_proto().rotation_slices as usize;
            let stored = StoredTopics::of(client.clone(), &name);
            for docs in &parts {
                let arrays = documents(docs);
                let read =
                    TopicCorpus::read("test", &name, (&arrays[0], arrays.get(1)), spec.words);
                let (read, content) = read.unwrap().canonical();
                let worker = TopicWorker::for_model(&lda, spec.words, &read, rotated);
                let topics = stored.load(content, worker.tokens() as usize).unwrap();
                for (w, t) in worker.words().zip(topics) {
                    expected[t as usize * width + w as usize] += 1;
                    expected[t as usize * width + width - 1] += 1;
                }
            }
            let on_servers = counts(&service.master_addr(), &name).await;
            assert_eq!(on_servers, expected, "{parallelism}, round {round}");
        }
        // A worker whose documents were not those of round 0 is told so.
        stored.start_round(4).await.unwrap();
        let model = Model::open(client.clone(), &name).unwrap();
        let mut other = topic_task(model, &Kept::default());
        other.add(&documents(&parts[0][1..]));
        let err = std::thread::spawn(move || other.run(|_, _| {}).unwrap_err().to_string());
        let err = err.join().unwrap();
        assert!(err.contains(&name) && err.contains("other rows"), "{err}");
        stored.drop().await.unwrap();
    }
}

/// A worker of topic model `model`, reading documents of the function "test", keeping its
/// state in `kept`.
fn topic_task(model: Model, kept: &Kept) -> TopicTask {
    let lda = Lda::of(&model, "test").unwrap();
    let context = TaskContext {
        function: "test",
        key_lists: KeyLists::default(),
        kept: kept.clone(),
    };
    TopicTask::new(model, lda, &context)
}

/// Creates topic model `name` of the small corpus's shape, for 3 workers in `parallelism`.
async fn three_worker_model(client: &Arc<PsClient>, name: &str, parallelism: &str) {
    let spec = CorpusSpec::small();
    let mut model = ModelSpec::new(registry::by_name("lda").unwrap(), spec.words);
    model.set("topics", &spec.topics.to_string()).unwrap();
    model.set("workers", "3").unwrap();
    model.set("parallelism", parallelism).unwrap();
    model.create(client, name).await.unwrap();
}

/// A part of the corpus as `ps_train`'s arguments: the words and their counts per document.
fn documents(docs: &[Vec<u32>]) -> Vec<ArrayRef> {
    let (mut words, mut counts) = (
        ListBuilder::new(UInt64Builder::new()),
        ListBuilder::new(Float64Builder::new()),
    );
    for doc in docs {
        // Each distinct word once with its count, as a bag of words.
        let mut bag = std::collections::BTreeMap::<u32, f64>::new();
        doc.iter().for_each(|&w| *bag.entry(w).or_default() += 1.0);
        words.append_value(bag.keys().map(|&w| Some(u64::from(w))));
        counts.append_value(bag.values().map(|&c| Some(c)));
    }
    vec![Arc::new(words.finish()), Arc::new(counts.finish())]
}

/// On a corpus drawn from 5 known topics, the log-likelihood rises to a plateau (half its gain
/// in the first 10 of 40 epochs, under 5% in the last 10) and the learned topics
/// match the true ones: after the best one-to-one matching (all 120 permutations tried), the
/// mean L1 distance between a learned topic's word distribution and its true topic's is below
/// 0.25, where a wrong matching is above 1. `ps_topics` on the held-out documents (about 60
/// tokens each) recovers the mixtures they were drawn from: mean L1 below 0.3, and below a
/// third of a uniform guess's; the epoch table's held-out perplexity falls. One worker, so the chain is the same at every run (two
/// workers' chains depend on when each sees the other's moves).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_topics_of_a_generated_corpus_are_recovered() {
    let spec = CorpusSpec::small();
    let corpus = corpus(&spec, 3);
    let (service, job) = corpus_job(&corpus, 2).await;
    let table = job
        .execute(&create("epochs = 40, workers = 1, holdout = 'held'"))
        .await
        .unwrap();
    let ll = column(&table[0], "log_likelihood");
    // Held-out perplexity falls from the random start's, below a fifth of the vocabulary
    // (a model that knew nothing scores about the vocabulary's size, 100 words).
    let perplexity = column(&table[0], "holdout_perplexity");
    eprintln!(
        "held-out perplexity {:.1} at the start, {:.1} at the end",
        perplexity[0], perplexity[40]
    );
    assert!(
        perplexity[40] < 0.8 * perplexity[0] && perplexity[40] < 20.0,
        "{perplexity:?}"
    );
    let gain = ll[40] - ll[0];
    assert!(gain > 0.0 && ll[10] - ll[0] > 0.5 * gain, "{ll:?}");
    assert!((ll[40] - ll[30]).abs() < 0.05 * gain, "no plateau: {ll:?}");

    let n = counts(&service.master_addr(), "topics").await;
    let (k, v) = (spec.topics, spec.words as usize);
    let learned: Vec<Vec<f64>> = (0..k)
        .map(|t| {
            let row = &n[t * (v + 1)..][..v + 1];
            let total = row[v] as f64 + v as f64 * 0.01;
            (0..v).map(|w| (row[w] as f64 + 0.01) / total).collect()
        })
        .collect();
    let (perm, best, worst) = matching(&learned, &corpus.truth.topics);
    eprintln!("mean L1 to the true topics: {best:.3} matched, {worst:.3} at worst");
    assert!(best < 0.25 && worst > 1.0, "{best} (worst {worst})");

    // Held-out documents: their inferred mixtures against the ones they were drawn from.
    let held = format!(
        "SELECT CAST(label AS BIGINT) AS doc, ps_topics('topics', idx, val) AS mixture FROM \
         read_libsvm('{}', 'index_base=0')",
        corpus.test.display()
    );
    let batches = job.execute(&held).await.unwrap();
    let (mut inferred, mut uniform, mut docs) = (0.0, 0.0, 0);
    for batch in &batches {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        let lists = batch.column(1).as_list::<i32>();
        for r in 0..batch.num_rows() {
            let mixture = lists.value(r);
            let mixture = mixture.as_primitive::<Float64Type>().values();
            let truth = &corpus.truth.mixtures[ids.value(r) as usize];
            let matched: Vec<f64> = (0..k).map(|t| truth[perm[t]]).collect();
            inferred += l1(mixture, &matched);
            uniform += l1(&vec![1.0 / k as f64; k], &matched);
            docs += 1;
        }
    }
    let (inferred, uniform) = (inferred / docs as f64, uniform / docs as f64);
    eprintln!(
        "{docs} held-out documents: mean L1 {inferred:.3} to their mixtures, {uniform:.3} for uniform ones"
    );
    assert!(
        docs > 20 && inferred < 0.3 && inferred < uniform / 3.0,
        "{inferred} vs {uniform}"
    );
}

/// The L1 distance of two distributions.
fn l1(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

/// The one-to-one matching of `learned` topics to `truth`'s with the least mean L1 distance
/// (every permutation tried), that distance, and the worst matching's.
fn matching(learned: &[Vec<f64>], truth: &[Vec<f64>]) -> (Vec<usize>, f64, f64) {
    let k = learned.len();
    let (mut best, mut worst) = ((Vec::new(), f64::INFINITY), 0.0f64);
    permutations(k, &mut |p| {
        let d = (0..k).map(|t| l1(&learned[t], &truth[p[t]])).sum::<f64>() / k as f64;
        if d < best.1 {
            best = (p.to_vec(), d);
        }
        worst = worst.max(d);
    });
    (best.0, best.1, worst)
}

/// Calls `each` with every permutation of `0..n`.
fn permutations(n: usize, each: &mut impl FnMut(&[usize])) {
    fn go(p: &mut Vec<usize>, at: usize, each: &mut impl FnMut(&[usize])) {
        if at == p.len() {
            return each(p);
        }
        for i in at..p.len() {
            p.swap(at, i);
            go(p, at + 1, each);
            p.swap(at, i);
        }
    }
    go(&mut (0..n).collect(), 0, each);
}

/// A topic model saved, read back and loaded: `read_model` gives every count on the servers
/// (each topic's summing to its total) with p(word | topic) and p(topic | word) as their
/// definitions give them; after `LOAD MODEL` under another name the servers hold the same
/// counts, and `ps_topics` infers the same mixtures (it is seeded by the document). A
/// `counts.parquet` with a count out of range is refused, naming the file and the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_topic_model_reads_and_loads_back_the_same() {
    let spec = CorpusSpec::small();
    let corpus = corpus(&spec, 7);
    let (service, job) = corpus_job(&corpus, 2).await;
    job.execute(&create("epochs = 3, workers = 2"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    job.execute(&format!("SAVE MODEL topics TO '{}'", path.display()))
        .await
        .unwrap();
    let rows = job
        .execute(&format!(
            "SELECT index, topic, count, word_probability, topic_probability FROM read_model('{}')",
            path.display()
        ))
        .await
        .unwrap();
    let (k, v) = (spec.topics, spec.words as usize);
    let n = counts(&service.master_addr(), "topics").await;
    let (mut listed, mut seen) = (vec![0i64; k * (v + 1)], 0);
    let mut word_sums = vec![0.0; k];
    for batch in &rows {
        let index = batch.column(0).as_primitive::<UInt64Type>();
        let topic = batch.column(1).as_primitive::<UInt32Type>();
        let count = batch.column(2).as_primitive::<Int64Type>();
        let word_p = batch.column(3).as_primitive::<Float64Type>();
        let topic_p = batch.column(4).as_primitive::<Float64Type>();
        for r in 0..batch.num_rows() {
            let (w, t, c) = (
                index.value(r) as usize,
                topic.value(r) as usize,
                count.value(r),
            );
            listed[t * (v + 1) + w] = c;
            listed[t * (v + 1) + v] += c;
            let total = n[t * (v + 1) + v] as f64;
            let expected = (c as f64 + 0.01) / (total + v as f64 * 0.01);
            assert!((word_p.value(r) - expected).abs() < 1e-12, "row {r}");
            let of_word: i64 = (0..k).map(|u| n[u * (v + 1) + w]).sum();
            let expected = (c as f64 + 0.01) / (of_word as f64 + k as f64 * 0.01);
            assert!((topic_p.value(r) - expected).abs() < 1e-12, "row {r}");
            word_sums[t] += word_p.value(r);
            seen += 1;
        }
    }
    assert_eq!(listed, n, "every count, each topic's summing to its total");
    assert!(
        seen > k && word_sums.iter().all(|&s| s > 0.9 && s <= 1.0),
        "{word_sums:?}"
    );

    job.execute(&format!("LOAD MODEL again FROM '{}'", path.display()))
        .await
        .unwrap();
    assert_eq!(counts(&service.master_addr(), "again").await, n);
    let mixtures = |model: &str| {
        format!("SELECT doc, ps_topics('{model}', words, counts) AS m FROM held ORDER BY doc")
    };
    let before = job.execute(&mixtures("topics")).await.unwrap();
    let after = job.execute(&mixtures("again")).await.unwrap();
    assert!(!before.is_empty());
    assert_eq!(before, after);

    // Damaged copies (laid out by hand, without versions): every count made negative;
    // counts whose topic totals would overflow (round 4, finding 13).
    for (copy, count, expected) in [
        ("negative", "CAST(-1 AS BIGINT)", "row 1"),
        ("overflowing", "CAST(4611686018427387904 AS BIGINT)", "2^53"),
    ] {
        let bad = dir.path().join(copy);
        job.execute(&format!(
            "COPY (SELECT feature, index, topic, {count} AS count FROM read_model('{}')) TO \
             '{}/counts.parquet'",
            path.display(),
            bad.display()
        ))
        .await
        .unwrap();
        std::fs::copy(path.join("v000001/model.json"), bad.join("model.json")).unwrap();
        let said = (job
            .execute(&format!("LOAD MODEL broken FROM '{}'", bad.display()))
            .await)
            .unwrap_err()
            .to_string();
        assert!(
            said.contains("counts.parquet") && said.contains(expected),
            "{copy}: {said}"
        );
    }
}

/// What a topic model cannot do is refused with the option, the row or the function named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_model_refuses_what_it_cannot_do() {
    let corpus = corpus(&CorpusSpec::small(), 2);
    let (_service, job) = corpus_job(&corpus, 2).await;
    let err = |sql: String| {
        let job = &job;
        async move { job.execute(&sql).await.unwrap_err().to_string() }
    };
    let no_topics = create("epochs = 1").replace("topics = 5, ", "");
    let said = err(no_topics).await;
    assert!(said.contains("option topics"), "{said}");
    let said = err(create("epochs = 1").replace("dim = 100", "dim = 50")).await;
    assert!(said.contains("dim = 50") && said.contains("row"), "{said}");
    job.execute(&create("epochs = 1")).await.unwrap();
    let said = err("TRAIN MODEL topics AS SELECT doc, words, counts FROM corpus".into()).await;
    assert!(said.contains("CREATE OR REPLACE MODEL"), "{said}");
    // One row: a failing call in one of two partitions would leave the other's call to a
    // service the test then stops.
    let said = err("SELECT ps_predict('topics', [1, 2], [1.0, 3.0])".into()).await;
    assert!(
        said.contains("lda model") && said.contains("ps_topics"),
        "{said}"
    );
    let linear = "CREATE MODEL lin OPTIONS (kind = 'logistic', dim = 100, epochs = 1) \
                  AS SELECT 1.0 AS label, [1, 2] AS idx, [1.0, 1.0] AS val";
    job.execute(linear).await.unwrap();
    for function in ["ps_topics", "ps_perplexity"] {
        let said = err(format!("SELECT {function}('lin', [1, 2])")).await;
        assert!(
            said.contains(&format!(
                "{function}: model 'lin' is a logistic model, not a topic"
            )),
            "{said}"
        );
    }
}

/// Raw text to a topic model in SQL: `ps_tokens` splits it, the counter numbers the words
/// (`min_count` counting every occurrence), `ps_index` maps each token to its word's index
/// with repeats kept, and `counter = 'vocab'` sizes the model; every token is trained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_text_goes_through_the_counter_with_repeats_kept() {
    let service = Standalone::start(StandaloneConfig::new(2)).await.unwrap();
    let job = Job::new(SessionContext::new(), &service.master_addr());
    for sql in [
        "CREATE TABLE docs AS SELECT * FROM (VALUES (1, 'The cat sat; the CAT ran.'), \
         (2, 'A dog ran and ran'), (3, 'cats and dogs')) AS t(id, text)",
        "SELECT ps_counter_add('vocab', ps_tokens(text, 'stop_words=english')) FROM docs",
        "SELECT ps_counter_seal('vocab', 2)",
        "CREATE TABLE corpus AS SELECT id AS doc, ps_index('vocab', ps_tokens(text, \
         'stop_words=english')) AS words FROM docs ORDER BY id",
    ] {
        job.execute(sql).await.unwrap();
    }
    let lists = job
        .execute("SELECT cardinality(words), words[1] = words[2] FROM corpus ORDER BY doc")
        .await
        .unwrap();
    // 'cat' twice and 'ran' twice in document 1 (words counted twice or more: cat, ran).
    let (length, repeated) = (common::scalar(&lists, 0), common::scalar(&lists, 1));
    assert_eq!((length, repeated), (3.0, 1.0), "cat, cat, ran: {lists:?}");
    let table = job
        .execute(
            "CREATE MODEL topics OPTIONS (kind = 'lda', topics = 2, counter = 'vocab', epochs = \
             2) AS SELECT doc, words FROM corpus",
        )
        .await
        .unwrap();
    let tokens = column(&table[0], "tokens");
    // cat, cat, ran (doc 1) and ran, ran (doc 2); 'cats' and 'dogs' are other words.
    assert_eq!(tokens, [5.0, 5.0, 5.0]);
    // Under rotation, four workers for three documents: those without any take part too.
    let table = job
        .execute(
            "CREATE MODEL rotated OPTIONS (kind = 'lda', topics = 2, counter = 'vocab', epochs \
             = 2, workers = 4, parallelism = 'rotation') AS SELECT doc, words FROM corpus",
        )
        .await
        .unwrap();
    assert_eq!(column(&table[0], "tokens"), [5.0, 5.0, 5.0]);
    // Saved, the counts are read back by word through the counter's dictionary.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    job.execute(&format!("SAVE MODEL topics TO '{}'", path.display()))
        .await
        .unwrap();
    let words = job
        .execute(&format!(
            "SELECT feature, sum(count) AS n FROM read_model('{}') GROUP BY feature ORDER BY \
             feature",
            path.display()
        ))
        .await
        .unwrap();
    let words = datafusion::arrow::util::pretty::pretty_format_batches(&words)
        .unwrap()
        .to_string();
    assert!(
        words.contains("| cat     | 2 |") && words.contains("| ran     | 3 |"),
        "{words}"
    );
}
