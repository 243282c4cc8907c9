"""XGBoost (`hist`) and LightGBM on the rows `angel-ps bench gbdt` trains on, at the same
settings; prints one JSON line per tool: training seconds, holdout AUC and log loss.

    python docs/bench/gbdt_compare.py --format csv|libsvm --train F --test F --features N \
        --trees 100 --depth 6 --learning-rate 0.1 --bins 32 --threads 2

`csv`: a header, then `label, f0, f1, ...` (every feature present); `libsvm`: `label
feature:value ...` with features from 0, absent ones missing. Needs xgboost, lightgbm,
scikit-learn and numpy.
"""
import argparse
import json
import time

import lightgbm as lgb
import numpy as np
import xgboost as xgb
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import log_loss, roc_auc_score


def load(path, form, features):
    if form == "csv":
        rows = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
        return rows[:, 1:], rows[:, 0]
    x, y = load_svmlight_file(path, n_features=features, zero_based=True)
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--format", choices=["csv", "libsvm"], required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--features", type=int, required=True)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--bins", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    a = parser.parse_args()
    x_train, y_train = load(a.train, a.format, a.features)
    x_test, y_test = load(a.test, a.format, a.features)
    y_train, y_test = (y_train > 0).astype(float), (y_test > 0).astype(float)
    models = {
        f"XGBoost {xgb.__version__} hist": xgb.XGBClassifier(
            n_estimators=a.trees, max_depth=a.depth, learning_rate=a.learning_rate,
            max_bin=a.bins, reg_lambda=1.0, min_child_weight=1.0, gamma=0.0,
            tree_method="hist", n_jobs=a.threads),
        f"LightGBM {lgb.__version__}": lgb.LGBMClassifier(
            n_estimators=a.trees, max_depth=a.depth, num_leaves=2 ** a.depth,
            learning_rate=a.learning_rate, max_bin=a.bins, reg_lambda=1.0,
            min_child_weight=1.0, min_child_samples=0, min_split_gain=0.0,
            n_jobs=a.threads, verbose=-1),
    }
    for tool, model in models.items():
        started = time.time()
        model.fit(x_train, y_train)
        seconds = time.time() - started
        p = model.predict_proba(x_test)[:, 1]
        print(json.dumps({"tool": tool, "seconds": seconds, "auc": roc_auc_score(y_test, p),
                          "logloss": log_loss(y_test, p)}), flush=True)


if __name__ == "__main__":
    main()
