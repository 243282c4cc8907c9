"""Type stubs of the native module; docs/python.md documents the API with examples."""

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__version__: str

class Error(Exception):
    """An angel-ps job or call failed; the message is the one `angel-ps` prints."""

class AccessError(Error):
    """The service refused the token (missing, wrong, or not of this namespace)."""

class NotFoundError(Error):
    """No matrix, counter, model or PS function has that name."""

class InvalidArgumentError(Error):
    """A call's arguments or a job's SQL do not make sense; the message names the problem."""

class UnavailableError(Error):
    """The service (or a server of it) could not be reached in time."""

def run(
    job: str | os.PathLike[str],
    vars: Mapping[str, object] | None = None,
    *,
    master: str | None = None,
    namespace: str | None = None,
    servers: int = 2,
    partitions: int = 0,
    ballista: str | None = None,
    stage: str | None = None,
    memory_limit: int | str | None = None,
    storage_level: str | None = None,
    token: str | None = None,
    tls_ca: str | os.PathLike[str] | None = None,
) -> list[pa.Table]:
    """Runs a SQL job (a .sql path, or SQL text); one pyarrow.Table per statement."""

def connect(
    master: str,
    *,
    token: str | None = None,
    tls_ca: str | os.PathLike[str] | None = None,
    namespace: str | None = None,
) -> Client:
    """Connects to the master at ``host:port``."""

def generate_click_logs(
    path: str | os.PathLike[str], rows: int = 1_000_000, seed: int = 7
) -> os.PathLike[str]:
    """Writes generated Criteo-like click logs to a CSV file; returns its path."""

Keys = Sequence[int] | npt.NDArray[np.integer[Any]]

class Client:
    """A connection to a running service: the PS verbs on NumPy arrays."""

    @property
    def master(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    def create_matrix(
        self,
        name: str,
        rows: int,
        cols: int,
        *,
        dtype: npt.DTypeLike = None,
        sparse: bool = False,
        optimizer: str | None = None,
        learning_rate: float = 0.01,
        l1: float = 0.0,
        l2: float = 0.0,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        compression: str | None = None,
        init_std: float = 0.0,
        seed: int = 0,
    ) -> None:
        """Creates a matrix of ``rows`` output rows and ``cols`` columns (keys)."""
    def describe(self, name: str) -> dict[str, Any]:
        """The matrix's name, rows, cols, dtype, storage, optimizer and partitions."""
    def drop_matrix(self, name: str) -> None:
        """Removes the matrix and its values."""
    def pull(self, matrix: str, keys: Keys, row: int | None = None) -> npt.NDArray[Any]:
        """Values of ``keys``: shape (len(keys), rows), or (len(keys),) with ``row``."""
    def push(
        self,
        matrix: str,
        keys: Keys,
        values: npt.ArrayLike,
        row: int | None = None,
        gradients: bool | None = None,
    ) -> None:
        """Adds ``values`` (or applies them as gradients, for a matrix with an optimizer)."""
    def psf(
        self, name: str, operands: Sequence[tuple[str, int]], args: Sequence[float] = ...
    ) -> npt.NDArray[np.float64]:
        """Runs a PS function over (matrix, server row) operands."""
    def create_counter(self, name: str, *, replace: bool = False) -> None:
        """Creates a distributed counter of string keys."""
    def counter_add(
        self, name: str, keys: Sequence[str], counts: Sequence[int] | None = None
    ) -> None:
        """Adds ``counts`` (default 1 each) to ``keys``."""
    def counter_seal(self, name: str, min_count: int = 1) -> int:
        """Indexes keys counted at least ``min_count`` times; returns how many."""
    def counter_index(
        self, name: str, keys: Sequence[str]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Counts and indices (-1: none) of ``keys``."""
    def counter_keys(self, name: str) -> list[tuple[str, int, int]]:
        """Every indexed key as (key, count, index), by index."""
    def drop_counter(self, name: str) -> None:
        """Removes the counter."""
    def status(self) -> dict[str, Any]:
        """Servers, matrices, counters, and the status as text."""
    def make_durable(self) -> dict[str, int]:
        """Has the servers snapshot this client's changes; waits until written."""
    def __enter__(self) -> Client: ...
    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool: ...

class Standalone:
    """A master and servers in this process on 127.0.0.1."""

    def __init__(
        self,
        servers: int = 2,
        *,
        token: str | None = None,
        snapshot_dir: str | None = None,
        snapshot_interval_secs: float = 10.0,
    ) -> None: ...
    @property
    def master(self) -> str: ...
    def connect(self, *, token: str | None = None, namespace: str | None = None) -> Client: ...
    def stop(self) -> None: ...
    def __enter__(self) -> Standalone: ...
    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool: ...
