"""Splits a MovieLens `ratings.csv` (userId,movieId,rating,timestamp; the "latest-small" or
any "ml-latest" set from GroupLens) into the train and holdout files that
`examples/mf/job.sql` and `mf_reference.py` read (header `user,item,rating`): a seeded random
10% held out, keeping only holdout ratings whose user and item have training ratings (no
model can score the others), so every tool is scored on the same pairs.

    python docs/bench/movielens_split.py ratings.csv OUT_DIR

MovieLens may be used for research but not redistributed: the repository does not hold it.
Not a test dependency: a benchmark companion (docs/benchmarks.md)."""

import argparse
import csv
import os
import random


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ratings")
    parser.add_argument("out")
    parser.add_argument("--holdout", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with open(args.ratings, newline="") as f:
        rows = [(r["userId"], r["movieId"], r["rating"]) for r in csv.DictReader(f)]
    random.Random(args.seed).shuffle(rows)
    cut = int(len(rows) * (1 - args.holdout))
    train, held = rows[:cut], rows[cut:]
    users, items = {r[0] for r in train}, {r[1] for r in train}
    test = [r for r in held if r[0] in users and r[1] in items]
    os.makedirs(args.out, exist_ok=True)
    for name, part in (("train.csv", train), ("test.csv", test)):
        with open(os.path.join(args.out, name), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["user", "item", "rating"])
            writer.writerows(part)
    print(f"{len(train)} training ratings, {len(test)} holdout ratings "
          f"({len(held) - len(test)} left out: user or item unseen in training)")


if __name__ == "__main__":
    main()
