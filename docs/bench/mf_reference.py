"""Matrix factorization with the tools users would pick instead of angel-ps, on the files
`angel-ps bench mf` writes: the `surprise` package's SVD (SGD, as angel-ps trains) and Spark
MLlib's ALS. Prints one JSON line per tool: seconds to fit, holdout RMSE.

    pip install scikit-surprise pyspark numpy pandas
    python docs/bench/mf_reference.py TRAIN.csv TEST.csv --rank 8 --epochs 6 \
        --learning-rate 0.03 --l2 0.02

Not a test dependency: a benchmark companion (docs/benchmarks.md)."""

import argparse
import json
import time


def surprise_svd(args):
    import pandas as pd
    from surprise import SVD, Dataset, Reader, accuracy

    train = pd.read_csv(args.train)
    test = pd.read_csv(args.test)
    reader = Reader(rating_scale=(train.rating.min(), train.rating.max()))
    data = Dataset.load_from_df(train[["user", "item", "rating"]], reader)
    trainset = data.build_full_trainset()
    model = SVD(n_factors=args.rank, n_epochs=args.epochs, lr_all=args.learning_rate,
                reg_all=args.l2, init_std_dev=0.1, random_state=0)
    started = time.perf_counter()
    model.fit(trainset)
    seconds = time.perf_counter() - started
    predictions = model.test(list(test[["user", "item", "rating"]].itertuples(index=False)))
    rmse = accuracy.rmse(predictions, verbose=False)
    return {"tool": "surprise SVD", "fit_seconds": seconds, "holdout_rmse": rmse}


def spark_als(args):
    from pyspark.ml.evaluation import RegressionEvaluator
    from pyspark.ml.recommendation import ALS
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local[{args.cores}]")
             .config("spark.driver.memory", "8g").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    schema = "user INT, item INT, rating DOUBLE"
    train = spark.read.csv(args.train, header=True, schema=schema).cache()
    test = spark.read.csv(args.test, header=True, schema=schema).cache()
    train.count(), test.count()
    als = ALS(rank=args.als_rank or args.rank, maxIter=args.epochs, regParam=args.als_l2, userCol="user",
              itemCol="item", ratingCol="rating", coldStartStrategy="drop", seed=0)
    started = time.perf_counter()
    model = als.fit(train)
    seconds = time.perf_counter() - started
    evaluator = RegressionEvaluator(metricName="rmse", labelCol="rating",
                                    predictionCol="prediction")
    rmse = evaluator.evaluate(model.transform(test))
    spark.stop()
    return {"tool": f"Spark MLlib ALS, rank {als.getRank()}", "fit_seconds": seconds,
            "holdout_rmse": rmse}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train")
    parser.add_argument("test")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--learning-rate", type=float, default=0.03)
    parser.add_argument("--l2", type=float, default=0.02)
    parser.add_argument("--als-l2", type=float, default=0.01,
                        help="ALS's regParam (scaled by each user's and item's ratings)")
    parser.add_argument("--als-rank", type=int, default=0,
                        help="ALS's rank (default: --rank; ALS has no biases, and rank + 2 "
                        "can hold the global mean and the user and item biases)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--tools", default="surprise,spark")
    args = parser.parse_args()
    runs = {"surprise": surprise_svd, "spark": spark_als}
    for tool in args.tools.split(","):
        print(json.dumps(runs[tool](args)), flush=True)


if __name__ == "__main__":
    main()
