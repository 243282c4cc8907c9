"""PyTorch on the parameter server: a factorization machine whose embedding table lives on the
PS, trained on click logs, against the SQL job's factorization machine on the same features.

    pip install "./python[torch]"
    python examples/python/torch_fm.py                 # 200,000 rows, 2 epochs
    python examples/python/torch_fm.py --rows 1000000 --epochs 3

SQL (``torch_fm.sql``, run by ``angel_ps.run`` on a service in this process) reads the CSV,
builds the features, indexes them through the PS counter, trains the SQL model (the
reference) and hands the indexed tables to Python. PyTorch then trains its own model. The
table has one column per feature and 1 + factors rows: the linear weight, then the factor
vector. Each mini-batch:
- pulls the columns its rows use,
- computes the loss and its gradients with autograd,
- pushes the gradients back. Adam runs on the servers.
The intercept is a PyTorch parameter with PyTorch's Adam.
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import numpy as np
import pyarrow as pa
import torch
import torch.nn.functional as F

import angel_ps

HERE = pathlib.Path(__file__).resolve().parent


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve by the rank-sum formula, ties given their average rank."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    start = 0
    for end in np.append(np.flatnonzero(np.diff(sorted_scores)) + 1, len(scores)):
        ranks[order[start:end]] = (start + end + 1) / 2
        start = end
    positives = labels > 0.5
    n_pos, n_neg = positives.sum(), (~positives).sum()
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


class Rows:
    """A table of (label, idx) rows from the SQL job: labels and feature-index lists."""

    def __init__(self, table: pa.Table):
        self.labels = table.column("label").to_numpy().astype(np.float32)
        self.lists = table.column("idx").combine_chunks()

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, rows: np.ndarray):
        """The rows' labels, their features' distinct keys, and for PyTorch's embedding_bag
        each feature's position among the keys and each row's first feature."""
        taken = self.lists.take(pa.array(rows))
        lengths = taken.value_lengths().to_numpy(zero_copy_only=False)
        flat = taken.flatten().to_numpy().astype(np.int64)
        keys, positions = np.unique(flat, return_inverse=True)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return self.labels[rows], keys, positions, starts


class PsFactorizationMachine:
    """The PyTorch model: its table on the PS, its intercept here."""

    def __init__(self, ps: angel_ps.Client, name: str, dim: int, factors: int, lr: float):
        self.ps, self.name = ps, name
        ps.create_matrix(name, 1 + factors, dim, optimizer="adam", learning_rate=lr,
                         init_std=0.01, seed=1)
        self.bias = torch.zeros(1, requires_grad=True)
        self.bias_optimizer = torch.optim.Adam([self.bias], lr=lr)

    def margins(self, table: torch.Tensor, positions, starts) -> torch.Tensor:
        """b + sum_i w_i + 1/2 sum_f ((sum_i v_if)^2 - sum_i v_if^2), per row."""
        positions, starts = torch.from_numpy(positions), torch.from_numpy(starts)
        sums = F.embedding_bag(positions, table, starts, mode="sum")
        squares = F.embedding_bag(positions, table * table, starts, mode="sum")
        pairs = 0.5 * (sums[:, 1:] ** 2 - squares[:, 1:]).sum(dim=1)
        return self.bias + sums[:, 0] + pairs

    def step(self, labels, keys, positions, starts) -> float:
        """One mini-batch: pull, forward, backward, push the table's gradients."""
        table = torch.from_numpy(self.ps.pull(self.name, keys)).requires_grad_()
        margins = self.margins(table, positions, starts)
        loss = F.binary_cross_entropy_with_logits(margins, torch.from_numpy(labels))
        self.bias_optimizer.zero_grad()
        loss.backward()
        self.ps.push(self.name, keys, table.grad.numpy())
        self.bias_optimizer.step()
        return loss.item()

    @torch.no_grad()
    def predict(self, keys, positions, starts) -> np.ndarray:
        table = torch.from_numpy(self.ps.pull(self.name, keys))
        return torch.sigmoid(self.margins(table, positions, starts)).numpy()


def score(model: PsFactorizationMachine, rows: Rows, batch_size: int) -> float:
    predictions = [
        model.predict(*rows.batch(np.arange(s, min(s + batch_size, len(rows))))[1:])
        for s in range(0, len(rows), batch_size)
    ]
    return auc(rows.labels, np.concatenate(predictions))


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of click logs")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--factors", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=0.003)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--seed", type=int, default=7, help="seed of the click logs")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp, angel_ps.Standalone(servers=2) as service:
        data = angel_ps.generate_click_logs(pathlib.Path(tmp) / "clicks.csv", args.rows, args.seed)
        started = time.perf_counter()
        tables = angel_ps.run(HERE / "torch_fm.sql", master=service.master, namespace="fm",
                              vars={"data": data, "factors": args.factors,
                                    "learning_rate": args.learning_rate,
                                    "batch_size": args.batch_size, "epochs": args.epochs})
        sql_seconds = time.perf_counter() - started
        # One table per statement of torch_fm.sql: the seal's is the 4th, the last three
        # are the SQL model's AUC and the indexed train and test rows.
        dim = tables[3].column("dim")[0].as_py()
        sql_auc = tables[-3].column("auc")[0].as_py()
        train, test = Rows(tables[-2]), Rows(tables[-1])

        ps = service.connect(namespace="torch")
        model = PsFactorizationMachine(ps, "fm", dim, args.factors, args.learning_rate)
        rng = np.random.default_rng(0)
        started = time.perf_counter()
        for epoch in range(1, args.epochs + 1):
            order = rng.permutation(len(train))
            losses = [model.step(*train.batch(order[s:s + args.batch_size]))
                      for s in range(0, len(train), args.batch_size)]
            print(f"epoch {epoch}: train loss {np.mean(losses):.4f}, "
                  f"holdout AUC {score(model, test, 4096):.4f}")
        torch_seconds = time.perf_counter() - started
        torch_auc = score(model, test, 4096)
    print(f"{len(train)} training rows, {dim} features, {args.factors} factors")
    print(f"SQL FM (CREATE MODEL):    holdout AUC {sql_auc:.4f}  (whole SQL job {sql_seconds:.1f}s)")
    print(f"PyTorch FM, table on PS:  holdout AUC {torch_auc:.4f}  (training {torch_seconds:.1f}s)")
    return {"sql_auc": sql_auc, "torch_auc": torch_auc, "dim": dim}


if __name__ == "__main__":
    main()
