"""scikit-learn's and Spark MLlib's L-BFGS logistic regression on the rows `angel-ps bench lbfgs`
trains on, at the same L2 penalty: prints one JSON line per tool with its training seconds,
iterations and the objective it reached, `mean log loss + l2/2 |w|^2` (intercept unpenalised),
computed here in double precision from its weights.

    python3 -m venv venv && venv/bin/pip install scikit-learn scipy pyspark
    venv/bin/python docs/bench/lbfgs_compare.py --format libsvm --train a9a_train.libsvm.gz \
        --features 123 --l2 1e-4 --threads 2

`--format libsvm`: 1-based indices, as LIBSVM writes them. `--format csv`: a header, then `label,idx` rows whose idx lists 0-based indices separated by
spaces (every value 1), as angel-ps's `COPY` writes them.
"""

import argparse
import csv
import json
import os
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file
from sklearn.linear_model import LogisticRegression


def read(args):
    if args.format == "libsvm":
        x, y = load_svmlight_file(args.train, n_features=args.features, zero_based=False)
        return x.tocsr(), (y > 0).astype(np.float64)
    labels, cols, offsets = [], [], [0]
    with open(args.train, newline="") as f:
        rows = csv.reader(f)
        next(rows)
        for label, idx in rows:
            labels.append(float(label) > 0)
            cols.extend(int(i) for i in idx.split())
            offsets.append(len(cols))
    x = sp.csr_matrix(
        (np.ones(len(cols)), np.array(cols), np.array(offsets)),
        shape=(len(labels), args.features),
    )
    return x, np.array(labels, dtype=np.float64)


def objective(x, y, w, b, l2):
    m = x @ w + b
    return float(np.mean(np.logaddexp(0.0, m) - y * m) + 0.5 * l2 * w @ w)


def sklearn_run(x, y, args):
    model = LogisticRegression(C=1.0 / (args.l2 * x.shape[0]), solver="lbfgs", max_iter=1000)
    started = time.perf_counter()
    model.fit(x, y)
    seconds = time.perf_counter() - started
    w, b = model.coef_.ravel(), float(model.intercept_[0])
    return {
        "tool": "scikit-learn lbfgs (tol 1e-4)",
        "seconds": seconds,
        "iterations": int(model.n_iter_[0]),
        "objective": objective(x, y, w, b, args.l2),
    }


def spark_run(x, y, args):
    from pyspark.ml.classification import LogisticRegression as SparkLR
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{args.threads}]")
        .config("spark.driver.memory", "8g")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "train.libsvm")
        dump_svmlight_file(x, y, path, zero_based=False)
        rows = spark.read.format("libsvm").option("numFeatures", args.features).load(path)
        rows = rows.repartition(args.threads).cache()
        rows.count()
        lr = SparkLR(
            regParam=args.l2, elasticNetParam=0.0, standardization=False, maxIter=100, tol=1e-6
        )
        started = time.perf_counter()
        model = lr.fit(rows)
        seconds = time.perf_counter() - started
    w = model.coefficients.toArray()
    b = float(model.intercept)
    iterations = model.summary.totalIterations
    spark.stop()
    return {
        "tool": "Spark MLlib LogisticRegression (tol 1e-6)",
        "seconds": seconds,
        "iterations": iterations,
        "objective": objective(x, y, w, b, args.l2),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--format", choices=["libsvm", "csv"], required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--features", type=int, required=True)
    p.add_argument("--l2", type=float, required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-spark", action="store_true")
    args = p.parse_args()
    x, y = read(args)
    print(json.dumps(sklearn_run(x, y, args)), flush=True)
    if not args.no_spark:
        print(json.dumps(spark_run(x, y, args)), flush=True)


if __name__ == "__main__":
    main()
