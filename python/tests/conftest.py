"""Shared fixtures: one in-process service (a real master and two servers on 127.0.0.1) for
the tests of a module, stopped after them."""

import pytest

import angel_ps


@pytest.fixture(scope="module")
def service():
    with angel_ps.Standalone(servers=2) as running:
        yield running


@pytest.fixture
def client(service, request):
    """A client in a namespace of the test's own, so tests never see each other's names."""
    return service.connect(namespace=request.node.name.replace("[", "-").strip("]")[:40])
