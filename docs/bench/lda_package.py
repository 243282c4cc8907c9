"""The Python `lda` package (collapsed Gibbs sampling in C) on a corpus `angel-ps bench lda`
generated, for `bench lda --python`: prints one JSON line with its seconds, tokens per second
and joint log-likelihood after the same sweeps, alpha and beta (the package's eta).

    pip install lda scipy
    python docs/bench/lda_package.py --input corpus.txt --topics 100 --sweeps 20
"""
import argparse
import json
import time

import lda
import numpy as np

from lda_corpus import held_out_perplexity, read, widen, with_prior


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--input", required=True)
    p.add_argument("--holdout", help="held-out documents, same layout: their perplexity")
    p.add_argument("--words", type=int, required=True)
    p.add_argument("--topics", type=int, required=True)
    p.add_argument("--sweeps", type=int, default=20)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--beta", type=float, default=0.01)
    a = p.parse_args()
    x = widen(read(a.input), a.words)
    # One log-likelihood before the first sweep, none during: the sweeps alone are timed.
    model = lda.LDA(n_topics=a.topics, n_iter=a.sweeps, alpha=a.alpha, eta=a.beta,
                    random_state=1, refresh=a.sweeps)
    started = time.perf_counter()
    model.fit(x)
    seconds = time.perf_counter() - started
    tokens = int(x.sum())
    said = {}
    if a.holdout:
        held = widen(read(a.holdout), a.words)
        # The package's transform gives each document's expected topic shares without the
        # prior; counted in as in the other runs' mixtures.
        theta = with_prior(model.transform(held), held, a.alpha)
        said["holdout_perplexity"] = held_out_perplexity(theta, model.topic_word_, held)
    print(json.dumps(said | {
        "topics": a.topics,
        "sweeps": a.sweeps,
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_second": tokens * a.sweeps / seconds,
        "initial_log_likelihood": model.loglikelihoods_[0],
        "log_likelihood": model.loglikelihood(),
    }))


if __name__ == "__main__":
    main()
