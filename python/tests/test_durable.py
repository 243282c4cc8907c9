"""A writer makes its changes durable before it leaves (round 4, finding 20): the servers
snapshot what its namespace changed and the call waits until it is written, as a SQL job does
at its end; leaving a ``with`` block does it too."""

import numpy as np

import angel_ps


def test_a_writer_makes_its_changes_durable_before_it_leaves(tmp_path):
    snapshots = str(tmp_path / "snapshots")
    # Snapshots every hour: only the writer's own calls write any here.
    with angel_ps.Standalone(
        servers=2, snapshot_dir=snapshots, snapshot_interval_secs=3600
    ) as service:
        with service.connect(namespace="writer") as writer:
            writer.create_matrix("w", 1, 1000)
            writer.push("w", np.arange(0, 1000, 7, dtype=np.uint64), np.ones(143))
            written = writer.make_durable()
            assert written["partitions"] >= 2 and written["bytes"] > 0, written
            assert writer.make_durable()["partitions"] == 0, "nothing changed since"
            writer.push("w", [7], [1.0])
        # Leaving the block wrote the last push: nothing of the namespace is left to write.
        assert service.connect(namespace="writer").make_durable()["partitions"] == 0
        reader = service.connect(namespace="writer")
        np.testing.assert_array_equal(reader.pull("w", [0, 7], row=0), [1, 2])


def test_without_snapshots_making_durable_writes_nothing():
    with angel_ps.Standalone(servers=1) as service:
        client = service.connect(namespace="plain")
        client.create_matrix("w", 1, 10)
        client.push("w", [1], [1.0])
        assert client.make_durable() == {"partitions": 0, "bytes": 0}
