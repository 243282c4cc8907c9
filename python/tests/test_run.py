"""angel_ps.run: SQL jobs as pyarrow tables, on an embedded service or a running one."""

import math
import pathlib

import pandas as pd
import pytest

import angel_ps

JOB = """
CREATE TABLE clicks AS
  SELECT * FROM (VALUES ('a', 1, 0.5), ('b', 0, 1.5), ('a', 1, 2.0), ('c', 0, 4.0))
  AS t(ad, clicked, cost);
SELECT ad, count(*) AS shows, sum(clicked) AS clicks, sum(cost) AS cost
  FROM clicks GROUP BY ad ORDER BY ad;
"""


def test_a_jobs_tables_round_trip_into_pandas():
    tables = angel_ps.run(JOB)
    assert len(tables) == 2, "one table per statement"
    assert tables[0].num_rows == 0, "CREATE TABLE returns no rows"
    frame = tables[1].to_pandas()
    rows = [("a", 1, 0.5), ("b", 0, 1.5), ("a", 1, 2.0), ("c", 0, 4.0)]
    expected = (
        pd.DataFrame(rows, columns=["ad", "clicked", "cost"])
        .groupby("ad", as_index=False)
        .agg(shows=("clicked", "size"), clicks=("clicked", "sum"), cost=("cost", "sum"))
    )
    assert list(frame.columns) == ["ad", "shows", "clicks", "cost"]
    assert frame["ad"].tolist() == expected["ad"].tolist()
    assert frame["shows"].tolist() == expected["shows"].tolist()
    assert frame["clicks"].tolist() == expected["clicks"].tolist()
    assert frame["cost"].tolist() == pytest.approx(expected["cost"].tolist())
    meta = tables[1].schema.metadata
    assert meta[b"angel_ps.line"] == b"5", "the statement starts on line 5 of the text"


def test_a_job_file_with_vars_counts_through_the_ps(tmp_path: pathlib.Path):
    job = tmp_path / "count.sql"
    job.write_text(
        "CREATE TABLE words AS SELECT * FROM (VALUES ('x'), ('y'), ('x'), ('z'), ('x'))"
        " AS t(w);\n"
        "SELECT ps_counter_add('words', make_array(w)) FROM words;\n"
        "SELECT ps_counter_seal('words', ${min_count}) AS n;\n"
        "SELECT w, ps_index('words', make_array(w)) AS i FROM words ORDER BY w;\n"
    )
    tables = angel_ps.run(job, vars={"min_count": 2})
    assert tables[2].to_pylist() == [{"n": 1}], "only 'x' is counted twice or more"
    rows = tables[3].to_pylist()
    assert [r["w"] for r in rows] == ["x", "x", "x", "y", "z"]
    assert [r["i"] for r in rows] == [[0], [0], [0], [], []]
    # The same file named as a string, every word indexed.
    again = angel_ps.run(str(job), vars={"min_count": 1})
    assert again[2].to_pylist() == [{"n": 3}]
    indices = {r["w"]: r["i"][0] for r in again[3].to_pylist()}
    assert sorted(indices.values()) == [0, 1, 2]


def test_a_bad_statement_raises_with_the_file_and_line(tmp_path: pathlib.Path):
    job = tmp_path / "bad.sql"
    job.write_text("SELECT 1;\n\nSELECT no_such_column FROM (VALUES (1)) AS t(a);\n")
    with pytest.raises(angel_ps.Error) as raised:
        angel_ps.run(job)
    message = str(raised.value)
    assert f"{job}:3" in message, message
    assert "no_such_column" in message, message


def test_a_missing_job_file_and_a_bad_argument_raise_clearly(tmp_path: pathlib.Path):
    missing = tmp_path / "missing.sql"
    with pytest.raises(angel_ps.Error, match="cannot read job file"):
        angel_ps.run(missing)
    with pytest.raises(TypeError, match="SQL text or a path"):
        angel_ps.run(42)
    with pytest.raises(ValueError, match="memory_limit"):
        angel_ps.run("SELECT 1", memory_limit="lots")


def test_a_job_runs_against_a_running_service_in_its_namespace(service):
    tables = angel_ps.run(
        "SELECT ps_counter_add('seen', make_array('k'));", master=service.master, namespace="job1"
    )
    assert len(tables) == 1
    client = service.connect(namespace="job1")
    counters = [c["name"] for c in client.status()["counters"]]
    assert "job1/seen" in counters, counters


def test_results_keep_types_and_nulls():
    table = angel_ps.run(
        "SELECT CAST(NULL AS DOUBLE) AS x, 2.5 AS y, 'a' AS s, CAST(7 AS BIGINT) AS n"
    )[0]
    row = table.to_pylist()[0]
    assert row["x"] is None
    assert math.isclose(row["y"], 2.5)
    assert row["s"] == "a" and row["n"] == 7
