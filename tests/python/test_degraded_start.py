"""A node that does not answer when a call connects (a call runs on the nodes that answer): three
real workers, the third killed by pid before any call. By default the call runs on the other two with a
TesseraWarning naming it, the answer exact and the report's ``left_out_at_start`` saying why;
``Cluster(require_all=True)`` refuses, naming it, as ``--require-all`` does."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tessera
from tessera import _tessera

from conftest import LocalCluster, stop_pids


@pytest.fixture(scope="module")
def degraded(workdir):
    started = LocalCluster(workdir, "pydegraded", nodes=3)
    try:
        stop_pids([started.pids[2]])  # node3: its port now refuses connections
        yield started
    finally:
        started.stop()


def _integers(rows: int, cols: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-8, 9, size=(rows, cols)).astype(np.float64)


def test_the_default_is_the_clis_without_require_all():
    assert inspect.signature(tessera.Cluster).parameters["require_all"].default is _tessera.default_require_all
    assert _tessera.default_require_all is False


def test_multiply_runs_on_the_nodes_that_answer_with_a_warning(degraded):
    a, b = _integers(53, 31, 1), _integers(31, 17, 2)
    with pytest.warns(tessera.TesseraWarning, match=r"node 'node3' left out: connect to 127\.0\.0\.1:\d+ failed"):
        c, report = degraded.cluster.multiply(a, b, policy="even", verify="exact")
    assert np.array_equal(c, a @ b)
    assert report.verified is True
    assert [node["node"] for node in report.left_out_at_start] == ["node3"]
    assert "refused" in report.left_out_at_start[0]["reason"]
    assert len(report.nodes) == 2
    assert any("node3" in warning for warning in report.warnings)


def test_graph_and_expressions_run_on_the_nodes_that_answer(degraded):
    with pytest.warns(tessera.TesseraWarning, match="node 'node3' left out"):
        _, report = degraded.cluster.connected_components("rmat:7", nodes="all", placement_cache="none", verify=True)
    assert report.verification["passed"]
    assert [node["node"] for node in report.left_out_at_start] == ["node3"]
    assert len(report.nodes) == 2

    a, b = _integers(23, 19, 3), _integers(19, 11, 4)
    expression = degraded.cluster.array(a) @ degraded.cluster.array(b)
    with pytest.warns(tessera.TesseraWarning, match="node 'node3' left out"):
        value, eval_report = expression.compute(mode="sequence", policy="even", verify="exact")
    assert np.array_equal(value, a @ b)
    assert [node["node"] for node in eval_report.left_out_at_start] == ["node3"]


def test_require_all_refuses_naming_the_node(degraded):
    strict = tessera.Cluster(degraded.config, run_dir=degraded.run_dir, require_all=True)
    with pytest.raises(tessera.ClusterError, match=r"node 'node3' \(127\.0\.0\.1:\d+\) is unreachable"):
        strict.multiply(np.ones((4, 4)), np.ones((4, 4)), policy="even")
