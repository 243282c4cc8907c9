"""What the `bench lda` scripts share: reading a corpus `angel-ps bench lda` generated, and the
held-out perplexity every run is scored by, the one `ps_perplexity` computes: each held-out
document's words scored under its own inferred mixture,
exp(-(sum over tokens of log sum_k theta_dk phi_kw) / tokens), the mixture with the prior
counted in: (expected tokens of the topic + alpha) / (tokens + topics x alpha).
"""
import numpy as np
import scipy.sparse as sp


def read(path):
    """A `doc word:count ...` file (words from 0) as a documents x words count matrix."""
    rows, cols, counts = [], [], []
    with open(path) as f:
        for d, line in enumerate(f):
            for pair in line.split()[1:]:
                w, c = pair.split(":")
                rows.append(d)
                cols.append(int(w))
                counts.append(int(float(c)))
    return sp.csr_matrix((counts, (rows, cols)), dtype=np.int64)


def widen(x, words):
    """`x` with `words` columns (a corpus whose last words no document uses has fewer)."""
    if x.shape[1] >= words:
        return x
    return sp.csr_matrix((x.data, x.indices, x.indptr), shape=(x.shape[0], words))


def with_prior(theta, x, alpha):
    """Mixtures `theta` (documents x topics, rows summing to 1) of documents `x` made the
    posterior mean under the prior: (theta x tokens + alpha) / (tokens + topics x alpha)."""
    tokens = np.asarray(x.sum(axis=1), dtype=float)
    return (theta * tokens + alpha) / (tokens + theta.shape[1] * alpha)


def held_out_perplexity(theta, phi, x):
    """The perplexity of documents `x` (counts) under mixtures `theta` (documents x topics)
    and topics `phi` (topics x words), both normalised here."""
    theta = theta / theta.sum(axis=1, keepdims=True)
    phi = phi / phi.sum(axis=1, keepdims=True)
    x = sp.coo_matrix(x)
    log_p = 0.0
    for start in range(0, x.nnz, 100_000):
        d, w, n = (a[start:start + 100_000] for a in (x.row, x.col, x.data))
        p = np.einsum("ik,ki->i", theta[d], phi[:, w])
        log_p += float(np.dot(n, np.log(p)))
    return float(np.exp(-log_p / x.sum()))
