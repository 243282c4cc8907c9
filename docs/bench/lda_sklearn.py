"""scikit-learn's online variational Bayes LDA (Hoffman et al.) on a corpus `angel-ps bench
lda` generated, for `bench lda --python`: the same topics and priors (doc_topic_prior = alpha,
topic_word_prior = beta), `--passes` passes over the training documents in mini-batches of
`--batch` documents; prints one JSON line with its seconds and the held-out perplexity of
`lda_corpus.py` (mixtures from `transform`, which are already the normalised variational
Dirichlet with the prior in it, topics from `components_`), the estimate the other runs are
scored by. scikit-learn's own `perplexity()` is a variational bound that
counts differently and is not comparable.

    pip install scikit-learn scipy
    python docs/bench/lda_sklearn.py --input corpus.txt --holdout held.txt --topics 100
"""
import argparse
import json
import time

from sklearn.decomposition import LatentDirichletAllocation

from lda_corpus import held_out_perplexity, read, widen


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--input", required=True)
    p.add_argument("--holdout", required=True)
    p.add_argument("--words", type=int, required=True)
    p.add_argument("--topics", type=int, required=True)
    p.add_argument("--passes", type=int, default=1)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--beta", type=float, default=0.01)
    a = p.parse_args()
    x = widen(read(a.input), a.words)
    model = LatentDirichletAllocation(
        n_components=a.topics, doc_topic_prior=a.alpha, topic_word_prior=a.beta,
        learning_method="online", max_iter=a.passes, batch_size=a.batch, random_state=1)
    started = time.perf_counter()
    model.fit(x)
    seconds = time.perf_counter() - started
    held = widen(read(a.holdout), a.words)
    print(json.dumps({
        "topics": a.topics,
        "passes": a.passes,
        "seconds": seconds,
        "tokens": int(x.sum()),
        "holdout_perplexity": held_out_perplexity(model.transform(held), model.components_,
                                                  held),
    }))


if __name__ == "__main__":
    main()
