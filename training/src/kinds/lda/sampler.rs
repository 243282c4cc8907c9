//! [`Sampler`]: SparseLDA's draw of a token's topic (Yao, Mimno and McCallum, KDD 2009), whose
//! cost grows with the topics the token's word and document use, not with the number of
//! topics K.
//!
//! The collapsed Gibbs conditional `p(z = k) ∝ (n_dk + α)(n_wk + β) / (n_k + Vβ)` is the sum
//! of three buckets:
//!
//! - `s_k = αβ / (n_k + Vβ)`: every topic, but its sum is kept up to date, and a draw falls in
//!   it rarely (its mass is about αK/V of the total);
//! - `r_k = β n_dk / (n_k + Vβ)`: the document's topics;
//! - `q_k = n_wk (n_dk + α) / (n_k + Vβ)`: the word's topics, with `(n_dk + α) / (n_k + Vβ)`
//!   cached per topic for the current document.
//!
//! A sampler holds the counts one step samples against: the topic totals, the step's words'
//! counts (dense per word, with the list of topics each word uses), and the current
//! document's counts (expanded while its tokens are drawn).

use rand::Rng;

use super::Priors;

/// See the module documentation.
#[derive(Debug)]
pub struct Sampler {
    k: usize,
    alpha: f64,
    beta: f64,
    v_beta: f64,
    /// `n_k`, and `1 / (n_k + Vβ)`.
    totals: Vec<i64>,
    inv: Vec<f64>,
    /// `(n_dk + α) / (n_k + Vβ)` for the open document.
    coef: Vec<f64>,
    /// The s and r buckets' sums.
    s: f64,
    r: f64,
    /// The step's words' counts, word after word (`k` each), and each word's topics with a
    /// count.
    words: Vec<i64>,
    word_topics: Vec<Vec<u32>>,
    /// The open document's counts (dense) and its topics with a count.
    doc: Vec<u32>,
    doc_topics: Vec<u32>,
    /// The q bucket's weights of the current draw.
    q: Vec<f64>,
}

impl Sampler {
    /// A sampler over `totals` (`n_k`) and the counts of a step's words (`words`, word after
    /// word, K each).
    pub fn new(priors: &Priors, totals: Vec<i64>, words: Vec<i64>) -> Self {
        let k = priors.topics;
        let word_topics = words
            .chunks(k)
            .map(|w| (0..k as u32).filter(|&t| w[t as usize] > 0).collect())
            .collect();
        let mut sampler = Sampler {
            k,
            alpha: priors.alpha,
            beta: priors.beta,
            v_beta: priors.words as f64 * priors.beta,
            inv: vec![0.0; k],
            coef: vec![0.0; k],
            totals,
            s: 0.0,
            r: 0.0,
            words,
            word_topics,
            doc: vec![0; k],
            doc_topics: Vec::new(),
            q: Vec::new(),
        };
        for t in 0..k {
            sampler.inv[t] = 1.0 / (sampler.totals[t] as f64 + sampler.v_beta);
            sampler.coef[t] = sampler.alpha * sampler.inv[t];
            sampler.s += sampler.alpha * sampler.beta * sampler.inv[t];
        }
        sampler
    }

    /// Opens a document whose counts are `counts` (topic, count): its tokens are drawn next.
    pub fn open(&mut self, counts: &[(u32, u32)]) {
        self.r = 0.0;
        for &(t, c) in counts {
            let t_ = t as usize;
            self.doc[t_] = c;
            self.doc_topics.push(t);
            self.coef[t_] = (self.alpha + f64::from(c)) * self.inv[t_];
            self.r += self.beta * f64::from(c) * self.inv[t_];
        }
    }

    /// Closes the open document, writing its counts back into `counts`.
    pub fn close(&mut self, counts: &mut Vec<(u32, u32)>) {
        counts.clear();
        for t in self.doc_topics.drain(..) {
            let t_ = t as usize;
            counts.push((t, self.doc[t_]));
            self.doc[t_] = 0;
            self.coef[t_] = self.alpha * self.inv[t_];
        }
    }

    /// Draws a new topic for a token of the step's word `w` in the open document, now of
    /// topic `old`: the token leaves `old`, and joins the topic drawn, which is returned.
    pub fn resample(&mut self, w: usize, old: u32, rng: &mut impl Rng) -> u32 {
        self.change(w, old, -1);
        let new = self.draw(w, rng);
        self.change(w, new, 1);
        new
    }

    /// Adds `delta` (±1) to the counts of topic `t` for word `w` and the open document,
    /// keeping the caches and bucket sums.
    fn change(&mut self, w: usize, t: u32, delta: i64) {
        let t_ = t as usize;
        let (ab, b) = (self.alpha * self.beta, self.beta);
        self.s -= ab * self.inv[t_];
        self.r -= b * f64::from(self.doc[t_]) * self.inv[t_];
        self.totals[t_] += delta;
        self.inv[t_] = 1.0 / (self.totals[t_] as f64 + self.v_beta);
        let doc = i64::from(self.doc[t_]) + delta;
        self.doc[t_] = doc as u32;
        self.s += ab * self.inv[t_];
        self.r += b * doc as f64 * self.inv[t_];
        self.coef[t_] = (self.alpha + doc as f64) * self.inv[t_];
        match (delta, doc) {
            (1, 1) => self.doc_topics.push(t),
            (-1, 0) => remove(&mut self.doc_topics, t),
            _ => {}
        }
        let count = &mut self.words[w * self.k + t_];
        *count += delta;
        match (delta, *count) {
            (1, 1) => self.word_topics[w].push(t),
            (-1, 0) => remove(&mut self.word_topics[w], t),
            _ => {}
        }
    }

    /// A topic drawn from the conditional of a token of word `w` in the open document (the
    /// token itself out of the counts).
    fn draw(&mut self, w: usize, rng: &mut impl Rng) -> u32 {
        let counts = &self.words[w * self.k..][..self.k];
        self.q.clear();
        let mut q = 0.0;
        for &t in &self.word_topics[w] {
            let weight = counts[t as usize] as f64 * self.coef[t as usize];
            q += weight;
            self.q.push(weight);
        }
        let mut u = rng.random::<f64>() * (self.s + self.r + q);
        if u < q {
            return pick(&self.word_topics[w], self.q.iter().copied(), u);
        }
        u -= q;
        if u < self.r {
            let r_k = |&t: &u32| self.beta * f64::from(self.doc[t as usize]) * self.inv[t as usize];
            return pick(&self.doc_topics, self.doc_topics.iter().map(r_k), u);
        }
        u -= self.r;
        let ab = self.alpha * self.beta;
        let mut t = 0;
        while t + 1 < self.k {
            u -= ab * self.inv[t];
            if u < 0.0 {
                break;
            }
            t += 1;
        }
        t as u32
    }

    /// The topic totals and the step's words' counts (word after word) as sampled.
    pub fn into_counts(self) -> (Vec<i64>, Vec<i64>) {
        (self.totals, self.words)
    }
}

/// The topic of `topics` at which the running sum of `weights` passes `u` (the last one when
/// rounding leaves `u` past the sum).
fn pick(topics: &[u32], weights: impl Iterator<Item = f64>, mut u: f64) -> u32 {
    for (&t, weight) in topics.iter().zip(weights) {
        u -= weight;
        if u < 0.0 {
            return t;
        }
    }
    *topics.last().expect("a bucket with mass has a topic")
}

/// Removes `t` from `topics` (order does not matter).
fn remove(topics: &mut Vec<u32>, t: u32) {
    if let Some(at) = topics.iter().position(|&x| x == t) {
        topics.swap_remove(at);
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    use super::*;

    /// The sparse draws follow the dense conditional computed from the formula, topic by
    /// topic: 200,000 draws from one state, each topic's share within 4 standard errors.
    #[test]
    fn draws_follow_the_collapsed_gibbs_conditional() {
        let priors = Priors {
            topics: 6,
            words: 50,
            alpha: 0.3,
            beta: 0.05,
        };
        let totals = vec![40, 3, 0, 25, 9, 14];
        // Two words; the drawn token is word 1's, now of topic 3.
        let words = vec![5, 0, 0, 2, 1, 0, 0, 1, 0, 4, 0, 2];
        let doc = [(3, 2), (4, 1), (0, 3)];
        let (w, old) = (1, 3u32);
        // The conditional, the token taken out of word 1, the document and topic 3.
        let (mut n_w, mut n_d, mut n_k) =
            (words[6..].to_vec(), vec![3, 0, 0, 2, 1, 0], totals.clone());
        n_w[3] -= 1;
        n_d[3] -= 1;
        n_k[3] -= 1;
        let p: Vec<f64> = (0..6)
            .map(|t| {
                (f64::from(n_d[t]) + 0.3) * (n_w[t] as f64 + 0.05) / (n_k[t] as f64 + 50.0 * 0.05)
            })
            .collect();
        let sum: f64 = p.iter().sum();
        let mut rng = SmallRng::seed_from_u64(7);
        let draws = 200_000;
        let mut seen = [0u32; 6];
        for _ in 0..draws {
            let mut sampler = Sampler::new(&priors, totals.clone(), words.clone());
            sampler.open(&doc);
            seen[sampler.resample(w, old, &mut rng) as usize] += 1;
        }
        for t in 0..6 {
            let expected = p[t] / sum;
            let share = f64::from(seen[t]) / draws as f64;
            let se = (expected * (1.0 - expected) / draws as f64).sqrt();
            assert!(
                (share - expected).abs() < 4.0 * se + 1e-9,
                "topic {t}: drawn {share}, conditional {expected}"
            );
        }
    }

    /// After any draws, the counts a sampler gives back are the counts it started from with
    /// each token moved from its old topic to its new one, and the document's too.
    #[test]
    fn counts_move_with_the_tokens() {
        let priors = Priors {
            topics: 4,
            words: 10,
            alpha: 0.1,
            beta: 0.01,
        };
        let mut sampler = Sampler::new(&priors, vec![3, 1, 0, 2], vec![2, 0, 0, 1, 1, 1, 0, 1]);
        sampler.open(&[(0, 2), (3, 1)]);
        let mut rng = SmallRng::seed_from_u64(3);
        let tokens = [(0usize, 0u32), (0, 3), (1, 0)];
        let moved: Vec<u32> = (tokens.iter())
            .map(|&(w, t)| sampler.resample(w, t, &mut rng))
            .collect();
        let mut doc = Vec::new();
        sampler.close(&mut doc);
        let (totals, words) = sampler.into_counts();
        let (mut want_totals, mut want_words) = (vec![3, 1, 0, 2], vec![2, 0, 0, 1, 1, 1, 0, 1]);
        let mut want_doc = [2u32, 0, 0, 1];
        for (&(w, old), &new) in tokens.iter().zip(&moved) {
            for (t, d) in [(old as usize, -1), (new as usize, 1)] {
                want_totals[t] += d;
                want_words[w * 4 + t] += d;
                want_doc[t] = (i64::from(want_doc[t]) + d) as u32;
            }
        }
        assert_eq!((totals, words), (want_totals, want_words));
        doc.sort();
        let want: Vec<(u32, u32)> = (0..4u32)
            .filter(|&t| want_doc[t as usize] > 0)
            .map(|t| (t, want_doc[t as usize]))
            .collect();
        assert_eq!(doc, want);
    }
}
