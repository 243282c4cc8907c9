"""scikit-learn's KMeans (Lloyd) and MiniBatchKMeans on the points `angel-ps bench kmeans`
clusters, at the same k and from the same first centres: prints one JSON line per run with its
training seconds, iterations and the inertia of its centres over every point (the summed
squared distance of each point to its nearest centre), computed here the same way for every
run. With `--seeds-out FILE` it only draws the first centres (scikit-learn's k-means++) and
writes them as CSV (`id, x0, ..`) for angel-ps's `init = 'table:...'`; with `--seeds FILE`
every run starts from them.

    python3 -m venv venv && venv/bin/pip install scikit-learn numpy
    venv/bin/python docs/bench/kmeans_compare.py --raw points.f64 --dim 50 --k 10 --threads 2
"""

import argparse
import json
import os
import time

import numpy as np


def inertia(x, centres):
    # Squared distances by |x|^2 - 2 x.c + |c|^2, in chunks: 1M x k at once is fine.
    total = 0.0
    cc = (centres * centres).sum(axis=1)
    for start in range(0, x.shape[0], 200_000):
        part = x[start : start + 200_000]
        d = (part * part).sum(axis=1)[:, None] - 2 * part @ centres.T + cc[None, :]
        total += float(np.maximum(d.min(axis=1), 0.0).sum())
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--raw", required=True)
    p.add_argument("--dim", type=int, required=True)
    p.add_argument("--k", type=int, required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--seeds-out")
    p.add_argument("--seeds")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    from sklearn.cluster import KMeans, MiniBatchKMeans

    x = np.fromfile(args.raw, dtype="<f8").reshape(-1, args.dim)
    if args.seeds_out:
        from sklearn.cluster import kmeans_plusplus

        seeds, _ = kmeans_plusplus(x, n_clusters=args.k, random_state=0)
        with open(args.seeds_out, "w") as f:
            f.write("id," + ",".join(f"x{d}" for d in range(args.dim)) + "\n")
            for i, c in enumerate(seeds):
                f.write(f"{i}," + ",".join(repr(float(v)) for v in c) + "\n")
        return
    init = "k-means++"
    if args.seeds:
        init = np.loadtxt(args.seeds, delimiter=",", skiprows=1)[:, 1:]
    runs = [
        (
            "scikit-learn KMeans (lloyd, tol 1e-4)",
            KMeans(n_clusters=args.k, init=init, n_init=1, max_iter=args.max_iter,
                   algorithm="lloyd", random_state=0),
        ),
        (
            "scikit-learn MiniBatchKMeans (batch 1024)",
            MiniBatchKMeans(n_clusters=args.k, init=init, n_init=1, batch_size=1024,
                            max_iter=args.max_iter, random_state=0),
        ),
    ]
    for tool, model in runs:
        started = time.perf_counter()
        model.fit(x)
        seconds = time.perf_counter() - started
        print(json.dumps({
            "tool": tool,
            "seconds": seconds,
            "iterations": int(model.n_iter_),
            "inertia": inertia(x, model.cluster_centers_),
        }), flush=True)


if __name__ == "__main__":
    main()
