"""angel-ps from Python.

- ``run(job, vars=...)`` runs a SQL job as ``angel-ps run`` does and returns each
  statement's result as a ``pyarrow.Table``.
- ``connect(master, token=..., tls_ca=..., namespace=...)`` gives a ``Client`` with the
  parameter server's verbs on NumPy arrays: matrices, ``pull``, ``push``, counters, PS
  functions, status.
- ``Standalone(servers=2)`` runs a master and servers in this process.
- ``generate_click_logs(path, rows)`` writes the demo's click logs.

Every failure raises ``angel_ps.Error`` (or a subclass) with the message the command line
prints. See docs/python.md.
"""

from ._native import (
    AccessError,
    Client,
    Error,
    InvalidArgumentError,
    NotFoundError,
    Standalone,
    UnavailableError,
    __version__,
    connect,
    generate_click_logs,
    run,
)

__all__ = [
    "AccessError",
    "Client",
    "Error",
    "InvalidArgumentError",
    "NotFoundError",
    "Standalone",
    "UnavailableError",
    "__version__",
    "connect",
    "generate_click_logs",
    "run",
]
