"""Tokens: a service started with one refuses clients without it, or with another."""

import secrets

import numpy as np
import pytest

import angel_ps


def test_a_wrong_or_missing_token_raises_and_the_right_one_works():
    token = secrets.token_hex(32)
    with angel_ps.Standalone(servers=1, token=token) as service:
        with pytest.raises(angel_ps.AccessError):
            angel_ps.connect(service.master, token=secrets.token_hex(32))
        with pytest.raises(angel_ps.AccessError):
            angel_ps.connect(service.master)
        with pytest.raises(angel_ps.Error, match=service.master):
            angel_ps.run("SELECT 1", master=service.master, namespace="t")
        client = angel_ps.connect(service.master, token=token, namespace="t")
        client.create_matrix("m", 1, 4)
        client.push("m", [1], [2.0])
        np.testing.assert_array_equal(client.pull("m", [1], row=0), [2.0])
        tables = angel_ps.run("SELECT 1 AS one", master=service.master, token=token,
                              namespace="t")
        assert tables[0].to_pylist() == [{"one": 1}]


def test_a_malformed_token_is_refused_before_anything_is_sent():
    with pytest.raises(angel_ps.InvalidArgumentError, match="token="):
        angel_ps.connect("127.0.0.1:1", token="short")


def test_nobody_at_the_address_raises_unavailable():
    with pytest.raises(angel_ps.UnavailableError, match="127.0.0.1:1"):
        angel_ps.connect("127.0.0.1:1")
