"""XGBoost's and LightGBM's holdout AUC on UCI Adult with the features of examples/gbdt/job.sql,
at the settings the GBDT test and docs compare angel-ps with.

The same rows, split and features as the job: the six numbers as they are, an indicator per
category seen at least twice in the training rows (value 1; a missing category, `?`, and a
category not kept are absent), absent entries missing. The holdout is every person whose
census weight is a multiple of 5.

    python docs/bench/xgboost_adult.py      # needs xgboost, lightgbm, scikit-learn, scipy
"""
import collections
import csv
import gzip
import io
import time

import lightgbm as lgb
import numpy as np
import xgboost as xgb
from scipy.sparse import csr_matrix
from sklearn.metrics import roc_auc_score

NUMBERS = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
CATEGORIES = [("workclass", 1), ("education", 3), ("marital", 5), ("occupation", 6),
              ("relationship", 7), ("race", 8), ("sex", 9), ("country", 13)]
NUMBER_COLUMNS = [0, 2, 4, 10, 11, 12]


def people(path):
    with gzip.open(path, "rt") as f:
        for row in csv.reader(io.StringIO(f.read())):
            if len(row) != 15:
                continue
            row = [cell.strip() for cell in row]
            numbers = [float(row[c]) for c in NUMBER_COLUMNS]
            categories = [f"{name}={row[c]}" for name, c in CATEGORIES if row[c] != "?"]
            label = 1.0 if row[14].startswith(">50K") else 0.0
            yield label, int(row[2]) % 5 == 0, numbers, categories


rows = list(people("examples/data/adult/adult.data.gz"))
counts = collections.Counter(c for _, holdout, _, cs in rows if not holdout for c in cs)
kept = sorted(c for c, n in counts.items() if n >= 2)
column = {c: len(NUMBERS) + i for i, c in enumerate(kept)}


def matrix(holdout):
    data, indices, indptr, labels = [], [], [0], []
    for label, is_holdout, numbers, categories in rows:
        if is_holdout != holdout:
            continue
        data += numbers
        indices += range(len(NUMBERS))
        for c in categories:
            if c in column:
                data.append(1.0)
                indices.append(column[c])
        indptr.append(len(data))
        labels.append(label)
    x = csr_matrix((data, indices, indptr), shape=(len(labels), len(NUMBERS) + len(kept)))
    return x, np.array(labels)


x_train, y_train = matrix(False)
x_test, y_test = matrix(True)
print(f"train {x_train.shape[0]} rows, test {x_test.shape[0]}, features {x_train.shape[1]}")
for trees, depth, rate in [(30, 4, 0.3), (100, 6, 0.1)]:
    started = time.time()
    model = xgb.XGBClassifier(
        n_estimators=trees, max_depth=depth, learning_rate=rate, max_bin=32, reg_lambda=1.0,
        min_child_weight=1.0, gamma=0.0, tree_method="hist", n_jobs=2)
    model.fit(x_train, y_train)
    auc = roc_auc_score(y_test, model.predict_proba(x_test)[:, 1])
    print(f"trees {trees} depth {depth} learning_rate {rate}: xgboost {xgb.__version__} "
          f"auc {auc:.4f} seconds {time.time() - started:.2f}")
    started = time.time()
    model = lgb.LGBMClassifier(
        n_estimators=trees, max_depth=depth, num_leaves=2 ** depth, learning_rate=rate,
        max_bin=32, reg_lambda=1.0, min_child_weight=1.0, min_child_samples=0,
        min_split_gain=0.0, n_jobs=2, verbose=-1)
    model.fit(x_train, y_train)
    auc = roc_auc_score(y_test, model.predict_proba(x_test)[:, 1])
    print(f"trees {trees} depth {depth} learning_rate {rate}: lightgbm {lgb.__version__} "
          f"auc {auc:.4f} seconds {time.time() - started:.2f}")
