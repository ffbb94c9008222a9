"""A GPU node lost mid-sweep: its actors die, its in-flight points go back to the queue, and the
workers left finish the sweep; nothing is lost or stored twice."""

import threading
import time

import pytest
from farmkit import HALF_POINTS, measurements
from ray.cluster_utils import Cluster

from farm.driver import Driver, SweepOptions
from farm.spec import load_spec


@pytest.fixture
def two_gpu_nodes():
    """A head without GPUs and two nodes with one logical GPU each, all on this machine."""
    import ray

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    nodes = [cluster.add_node(num_cpus=1, num_gpus=1) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster, nodes
    ray.shutdown()
    cluster.shutdown()


def test_lost_node_requeues_its_points(two_gpu_nodes, half_spec, tmp_path):
    """12 points in 4 batches, all in flight from the start (2 per worker): what the lost node had not
    finished, the other worker runs."""
    cluster, nodes = two_gpu_nodes
    db = tmp_path / "results.db"
    driver = Driver(load_spec(path=str(half_spec)), SweepOptions(db=str(db), progress=False), "t")
    removed = []

    def remove_a_busy_node():
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not removed:
            for w in driver.workers:
                if w.info and w.inflight:
                    node = next((n for n in nodes if n.node_id == w.info.node_id), None)
                    if node is not None:
                        cluster.remove_node(node)
                        removed.append(w.info.node_id)
                        return
            time.sleep(0.05)

    watcher = threading.Thread(target=remove_a_busy_node, daemon=True)
    watcher.start()
    result = driver.run()
    watcher.join(timeout=1)
    assert removed, "no worker was busy on a GPU node"
    rows = measurements(db)
    assert result.status == "finished"
    assert len(rows) == HALF_POINTS and len({r[:5] for r in rows}) == HALF_POINTS
    assert {status for *_, status in rows} == {"ok"}
    assert [f.kind for f in result.faults] == ["worker lost"]
    assert result.faults[0].recovery_s is None  # its node is gone: the sweep finished without it
