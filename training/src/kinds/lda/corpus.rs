//! [`Corpus`]: a worker's documents, read from a call's `words [, counts]` columns: a list of
//! word indices per document, with repeats (`ps_index` of `ps_tokens`), or a bag of words
//! (`read_libsvm`'s `word:count` pairs: the indices and their counts).

use arrow::array::ArrayRef;

use crate::error::{Result, input_err};
use crate::rows::SparseRows;

/// Most tokens a corpus (a worker's documents, or one call's) may hold: 2^28, about 3 GB of
/// a worker's state at 12 bytes a token (its word, its place in its slice, its topic). Counts
/// are checked against it before they are expanded, so a bag of words asking for more fails
/// naming its row instead of allocating what its counts say.
pub const MAX_TOKENS: usize = 1 << 28;

/// A seed drawn from `seed` and the tokens `words`: a chain's or a folding-in's draws follow
/// its model's seed and its documents, so the same job or document always draws the same.
pub fn seed_of(seed: u64, words: &[u32]) -> u64 {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    seed ^ xxhash_rust::xxh3::xxh3_64(&bytes)
}

/// Documents as token lists of word indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Corpus {
    /// Document `d`'s tokens are `words[offsets[d]..offsets[d + 1]]`.
    pub offsets: Vec<usize>,
    pub words: Vec<u32>,
}

impl Default for Corpus {
    /// No documents.
    fn default() -> Self {
        Corpus {
            offsets: vec![0],
            words: Vec::new(),
        }
    }
}

impl Corpus {
    /// The documents of `words` (a list of indices per row) and optional `counts` (a list of
    /// whole numbers per row, as long), checked against a vocabulary of `vocabulary` words of
    /// model `model`; errors name the row and the value.
    pub fn read(
        function: &str,
        model: &str,
        columns: (&ArrayRef, Option<&ArrayRef>),
        vocabulary: u64,
    ) -> Result<Self> {
        let mut corpus = Corpus::default();
        corpus.read_more(function, model, columns, vocabulary)?;
        Ok(corpus)
    }

    /// Adds the documents of `words` and `counts` after those held, as [`Corpus::read`]
    /// reads them; refuses, before expanding any count, a batch that would take the corpus
    /// past [`MAX_TOKENS`].
    pub fn read_more(
        &mut self,
        function: &str,
        model: &str,
        (words, counts): (&ArrayRef, Option<&ArrayRef>),
        vocabulary: u64,
    ) -> Result<()> {
        let rows = SparseRows::from_arrays(function, None, words, counts)?;
        rows.check(function, model, vocabulary)?;
        let mut tokens = self.words.len() as f64;
        for r in 0..rows.len() {
            for (at, &word) in rows.keys(r).iter().enumerate() {
                let count = rows.value(r, at);
                if !(count >= 0.0 && count.fract() == 0.0) {
                    return input_err(format!(
                        "{function}: row {r} of the batch counts word {word} {count} times; a \
                         count must be a whole number, 0 or more"
                    ));
                }
                tokens += count;
            }
            if tokens > MAX_TOKENS as f64 {
                return input_err(format!(
                    "{function}: model '{model}': row {r} of the batch takes the documents to \
                     {tokens} tokens, past the {MAX_TOKENS} one worker or call holds; give the \
                     statement more workers (target_partitions), or fewer tokens per document"
                ));
            }
        }
        self.words.reserve(tokens as usize - self.words.len());
        for r in 0..rows.len() {
            for (at, &word) in rows.keys(r).iter().enumerate() {
                let count = rows.value(r, at) as usize;
                self.words.extend(std::iter::repeat_n(word as u32, count));
            }
            self.offsets.push(self.words.len());
        }
        Ok(())
    }

    /// The same documents in an order of their content alone (by a hash of each document's
    /// tokens, then by the tokens), so a worker of the same documents arriving in another
    /// order numbers its tokens the same; and a hash of them all.
    pub fn canonical(&self) -> (Corpus, u64) {
        let mut docs: Vec<usize> = (0..self.docs()).collect();
        docs.sort_by_cached_key(|&d| (seed_of(0, self.doc(d)), self.doc(d)));
        let mut sorted = Corpus {
            offsets: vec![0],
            words: Vec::with_capacity(self.words.len()),
        };
        for d in docs {
            sorted.words.extend_from_slice(self.doc(d));
            sorted.offsets.push(sorted.words.len());
        }
        let lengths: Vec<u32> = (0..sorted.docs())
            .map(|d| sorted.doc(d).len() as u32)
            .collect();
        let content = seed_of(seed_of(0, &lengths), &sorted.words);
        (sorted, content)
    }

    /// Number of documents.
    pub fn docs(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Document `d`'s tokens.
    pub fn doc(&self, d: usize) -> &[u32] {
        &self.words[self.offsets[d]..self.offsets[d + 1]]
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Builder, ListBuilder, UInt64Builder};

    use super::*;

    fn list(rows: &[&[u64]]) -> ArrayRef {
        let mut b = ListBuilder::new(UInt64Builder::new());
        for row in rows {
            b.append_value(row.iter().map(|&x| Some(x)));
        }
        Arc::new(b.finish())
    }

    fn counts(rows: &[&[f64]]) -> ArrayRef {
        let mut b = ListBuilder::new(Float64Builder::new());
        for row in rows {
            b.append_value(row.iter().map(|&x| Some(x)));
        }
        Arc::new(b.finish())
    }

    #[test]
    fn tokens_keep_repeats_and_counts_expand_into_tokens() {
        let words = list(&[&[3, 1, 3], &[], &[0, 2]]);
        let corpus = Corpus::read("f", "m", (&words, None), 4).unwrap();
        assert_eq!(corpus.offsets, [0, 3, 3, 5]);
        assert_eq!(corpus.words, [3, 1, 3, 0, 2]);
        let bag = Corpus::read(
            "f",
            "m",
            (&list(&[&[1, 2]]), Some(&counts(&[&[2.0, 1.0]]))),
            4,
        )
        .unwrap();
        assert_eq!(bag.words, [1, 1, 2]);
        let mut both = corpus;
        let bag = (&list(&[&[1, 2]]), Some(&counts(&[&[2.0, 1.0]])));
        both.read_more("f", "m", bag, 4).unwrap();
        assert_eq!((both.docs(), both.doc(3)), (4, &[1, 1, 2][..]));
    }

    #[test]
    fn no_documents_make_an_empty_corpus() {
        let empty = Corpus::default();
        assert_eq!((empty.docs(), empty.canonical().0), (0, Corpus::default()));
    }

    #[test]
    fn the_canonical_order_and_hash_do_not_depend_on_the_documents_order() {
        let words = list(&[&[3, 1, 3], &[], &[0, 2], &[1]]);
        let shuffled = list(&[&[1], &[0, 2], &[3, 1, 3], &[]]);
        let [a, b] = [words, shuffled].map(|w| Corpus::read("f", "m", (&w, None), 4).unwrap());
        let ((a, hash_a), (b, hash_b)) = (a.canonical(), b.canonical());
        assert_eq!((&a, hash_a), (&b, hash_b));
        assert_eq!(a.docs(), 4);
        let other = Corpus::read("f", "m", (&list(&[&[3, 1], &[3], &[0, 2], &[1]]), None), 4);
        assert_ne!(
            other.unwrap().canonical().1,
            hash_a,
            "the same tokens, other documents"
        );
    }

    #[test]
    fn bad_words_and_counts_are_refused_naming_the_row() {
        let err = Corpus::read("f", "m", (&list(&[&[0], &[9]]), None), 4)
            .unwrap_err()
            .to_string();
        assert!(err.contains("row 1") && err.contains('9'), "{err}");
        let err = Corpus::read(
            "f",
            "m",
            (&list(&[&[0, 1]]), Some(&counts(&[&[1.0, 2.5]]))),
            4,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("row 0") && err.contains("2.5"), "{err}");
    }

    #[test]
    fn counts_past_the_tokens_a_corpus_holds_are_refused_before_they_are_expanded() {
        let huge = counts(&[&[1.0], &[1e9]]);
        let err = Corpus::read("f", "m", (&list(&[&[0], &[1]]), Some(&huge)), 4)
            .unwrap_err()
            .to_string();
        assert!(err.contains("row 1") && err.contains("268435456"), "{err}");
        // The limit is the corpus's: a batch that fits alone may not fit after others.
        let half = (MAX_TOKENS / 2 + 1) as f64;
        let mut corpus = Corpus::default();
        let one = counts(&[&[0.0]]);
        corpus
            .read_more("f", "m", (&list(&[&[0]]), Some(&one)), 4)
            .unwrap();
        let err = corpus
            .read_more(
                "f",
                "m",
                (&list(&[&[0], &[1]]), Some(&counts(&[&[half], &[half]]))),
                4,
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("row 1"), "{err}");
        assert_eq!(corpus.docs(), 1, "nothing of the refused batch was added");
    }
}
