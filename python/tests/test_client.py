"""angel_ps.connect / Client: the PS verbs on NumPy arrays against a real in-process service
(a master and two servers on 127.0.0.1)."""

import re

import numpy as np
import pytest

import angel_ps


def test_pull_returns_exactly_what_was_pushed(client):
    client.create_matrix("w", 3, 1000)
    keys = np.array([0, 7, 999, 500], dtype=np.uint64)
    values = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    client.push("w", keys, values)
    client.push("w", [7], [[1.0, 2.0, 3.0]])
    expected = values.copy()
    expected[1] += [1.0, 2.0, 3.0]
    pulled = client.pull("w", keys)
    assert pulled.dtype == np.float32 and pulled.shape == (4, 3)
    np.testing.assert_array_equal(pulled, expected)
    np.testing.assert_array_equal(client.pull("w", keys, row=2), expected[:, 2])
    # Keys never pushed read 0; duplicate keys in one push are summed.
    client.push("w", [3, 3], np.ones((2, 3)))
    np.testing.assert_array_equal(client.pull("w", [3, 4]), [[2, 2, 2], [0, 0, 0]])


def test_sparse_float64_and_int64_matrices_keep_their_types(client):
    client.create_matrix("big", 1, 1 << 40, dtype=np.float64, sparse=True)
    keys = np.array([(1 << 40) - 1, 12345678901, 3], dtype=np.int64)
    values = np.array([0.1, -2.5e-300, 1e300])
    client.push("big", keys, values)
    pulled = client.pull("big", keys)
    assert pulled.dtype == np.float64
    np.testing.assert_array_equal(pulled[:, 0], values)
    client.create_matrix("n", 1, 10, dtype="int64")
    client.push("n", [1, 2], np.array([2**40, -5]))
    np.testing.assert_array_equal(client.pull("n", [1, 2], row=0), [2**40, -5])
    assert client.describe("big")["storage"] == "sparse"
    assert client.describe("n")["dtype"] == "int64"


def adam(w, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    """One step of Adam with bias correction (Kingma and Ba, algorithm 1)."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    return w - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def test_pushes_to_a_matrix_with_an_optimizer_are_gradients(client):
    client.create_matrix("emb", 4, 50, optimizer="adam", learning_rate=0.05)
    info = client.describe("emb")
    assert info["rows"] == 4 and info["optimizer"] == "adam"
    assert info["server_rows"] == 16, "each output row keeps Adam's 3 state rows beside it"
    keys = np.array([2, 9, 40])
    rng = np.random.default_rng(7)
    w = np.zeros((3, 4))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t in range(1, 6):
        g = rng.normal(size=(3, 4)).astype(np.float32)
        client.push("emb", keys, g)
        w, m, v = adam(w, g.astype(np.float64), m, v, t, 0.05)
    # The servers keep weights and moments in float32.
    np.testing.assert_allclose(client.pull("emb", keys), w, rtol=1e-4, atol=1e-6)
    # gradients=False adds the values as they are.
    client.push("emb", [0], np.ones((1, 4)), gradients=False)
    np.testing.assert_array_equal(client.pull("emb", [0]), np.ones((1, 4)))


def test_sgd_moves_by_the_learning_rate_times_the_gradient(client):
    client.create_matrix("lin", 1, 8, optimizer="sgd", learning_rate=0.5)
    client.push("lin", [1, 5], [2.0, -4.0])
    np.testing.assert_array_equal(client.pull("lin", [1, 5], row=0), [-1.0, 2.0])


def test_init_std_draws_rows_at_random(client):
    client.create_matrix("r", 2, 20000, optimizer="adagrad", init_std=0.1, seed=3)
    values = client.pull("r", np.arange(20000))
    assert values.shape == (20000, 2)
    # 40000 draws of N(0, 0.01): the sample's std is within 2% of 0.1, its mean near 0.
    assert abs(values.std() - 0.1) < 0.002
    assert abs(values.mean()) < 0.002


def test_counters_count_seal_and_index(client):
    client.create_counter("feats")
    words = ["a", "b", "a", "c", "a", "b", "d"]
    client.counter_add("feats", words)
    client.counter_add("feats", ["d"], [5])
    size = client.counter_seal("feats", min_count=2)
    expected = {"a": 3, "b": 2, "c": 1, "d": 6}
    assert size == sum(1 for c in expected.values() if c >= 2)
    keys = ["a", "b", "c", "d", "zz"]
    counts, indices = client.counter_index("feats", keys)
    assert counts.tolist() == [3, 2, 1, 6, 0]
    assert indices[2] == -1 and indices[4] == -1, "c is too rare, zz unknown"
    assert sorted(indices[[0, 1, 3]].tolist()) == [0, 1, 2]
    listed = client.counter_keys("feats")
    assert [(k, c) for k, c, _ in listed] == sorted(
        [(k, c) for k, c in expected.items() if c >= 2], key=lambda kc: indices[keys.index(kc[0])]
    )
    client.drop_counter("feats")
    with pytest.raises(angel_ps.NotFoundError):
        client.counter_index("feats", ["a"])


def test_ps_functions_run_on_the_servers(client):
    client.create_matrix("v", 2, 100, dtype=np.float64)
    x = np.linspace(-1, 1, 100)
    client.push("v", np.arange(100), np.stack([x, 2 * x + 1], axis=1))
    assert client.psf("sum", [("v", 0)])[0] == pytest.approx(x.sum(), abs=1e-12)
    dot = client.psf("dot", [("v", 0), ("v", 1)])[0]
    assert dot == pytest.approx(float(x @ (2 * x + 1)), rel=1e-12)


def test_status_lists_servers_and_matrices(service):
    client = service.connect(namespace="st")
    client.create_matrix("s", 1, 10)
    status = client.status()
    assert len(status["servers"]) == 2 and all(s["reachable"] for s in status["servers"])
    names = [m["name"] for m in status["matrices"]]
    assert f"{client.namespace}/s" in names
    assert re.search(r"\|\s*st\s*\|\s*s\s*\|", status["text"]), "the text names namespace and matrix"
    client.drop_matrix("s")
    assert f"{client.namespace}/s" not in [m["name"] for m in client.status()["matrices"]]


def test_bad_calls_raise_and_name_the_problem(client):
    client.create_matrix("m", 2, 10)
    with pytest.raises(angel_ps.NotFoundError, match="nothere"):
        client.pull("nothere", [1])
    with pytest.raises(angel_ps.InvalidArgumentError, match="key -1 is negative"):
        client.pull("m", [1, -1])
    with pytest.raises(angel_ps.InvalidArgumentError, match="integers"):
        client.pull("m", [1.5])
    with pytest.raises(angel_ps.InvalidArgumentError, match=r"give shape \(2, 2\)"):
        client.push("m", [1, 2], [1.0, 2.0])
    with pytest.raises(angel_ps.InvalidArgumentError, match="row=5"):
        client.pull("m", [1], row=5)
    with pytest.raises(angel_ps.InvalidArgumentError):
        client.pull("m", [10])
    with pytest.raises(angel_ps.InvalidArgumentError, match="dtype"):
        client.create_matrix("bad", 1, 10, dtype="complex64")
    with pytest.raises(angel_ps.Error, match="no optimizer"):
        client.push("m", [1], [[1.0, 1.0]], gradients=True)
    # Nothing was half-applied by the refused calls.
    np.testing.assert_array_equal(client.pull("m", [1, 2]), np.zeros((2, 2)))
