"""A Python writer that leaves before a server dies loses nothing (round 4, finding 20): the
``python-writer-left`` scenario of ``angel-ps bench chaos``, run once with this interpreter
as the writer. The scenario starts a master and two servers of the binary, has a Python
process make the probe's changes inside a ``with`` block and exit, kills a server, and reads
every value back; a writer that skipped ``make_durable()`` leaves values lost."""

import json
import os
import pathlib
import subprocess
import sys


def angel_ps_binary():
    """The ``angel-ps`` binary the Rust tests built: ``$ANGEL_PS_BIN``, else the debug build in
    ``$CARGO_TARGET_DIR`` (or the repository's ``target``)."""
    if "ANGEL_PS_BIN" in os.environ:
        return pathlib.Path(os.environ["ANGEL_PS_BIN"])
    repo = pathlib.Path(__file__).resolve().parents[2]
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", repo / "target"))
    return target / "debug" / "angel-ps"


def test_a_server_killed_after_a_python_writer_left_keeps_its_changes():
    binary = angel_ps_binary()
    assert binary.exists(), (
        f"{binary} is missing: build it with `cargo build --workspace` or set ANGEL_PS_BIN"
    )
    ran = subprocess.run(
        [str(binary), "bench", "chaos", "--runs", "1", "--output", "json",
         "--scenario", "python-writer-left", "--python", sys.executable],
        capture_output=True, text=True, timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    tables = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    rows = [t for t in tables if t.get("table") == "chaos"][0]["rows"]
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["scenario"] == "python-writer-left", row
    assert (row["finished"], row["lost"], row["doubled"]) == (1, 0, 0), row
