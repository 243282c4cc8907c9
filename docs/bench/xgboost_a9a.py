"""XGBoost's holdout AUC on the a9a split of examples/data, at the settings the GBDT tests and
docs compare angel-ps with (tree_method = 'hist', absent features missing).

    python docs/bench/xgboost_a9a.py      # needs xgboost, scikit-learn and numpy
"""
import gzip
import time

import xgboost as xgb
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import roc_auc_score


def load(path):
    with gzip.open(path, "rb") as f:
        x, y = load_svmlight_file(f, n_features=123)
    return x, (y > 0).astype(float)


x_train, y_train = load("examples/data/a9a/a9a_train.libsvm.gz")
x_test, y_test = load("examples/data/a9a/a9a_test.libsvm.gz")
for trees, depth, rate in [(30, 4, 0.3), (100, 6, 0.1)]:
    started = time.time()
    model = xgb.XGBClassifier(
        n_estimators=trees, max_depth=depth, learning_rate=rate, max_bin=32, reg_lambda=1.0,
        min_child_weight=1.0, gamma=0.0, tree_method="hist", n_jobs=2)
    model.fit(x_train, y_train)
    auc = roc_auc_score(y_test, model.predict_proba(x_test)[:, 1])
    print(f"trees {trees} depth {depth} learning_rate {rate}: xgboost {xgb.__version__} "
          f"auc {auc:.4f} seconds {time.time() - started:.2f}")
