"""Cluster.scatter: a matrix placed once, multiplied by thin operands again and again."""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pytest

import tessera
from conftest import LocalCluster

# Products this small leave a node out by design; the warning says so and is not under test here.
pytestmark = pytest.mark.filterwarnings("ignore::tessera.cluster.TesseraWarning")


def test_products_ship_only_the_operand_and_equal_numpy(cluster):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((400, 300))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tessera.TesseraWarning)  # a product this small may leave a node out
        R = cluster.scatter(A, columns=4)
    with R:
        assert R.shape == (400, 300)
        assert sum(R.nodes.values()) == 400
        assert R.placement["bytes"] == A.nbytes + R.placement["bytes_moved"]
        for columns in (1, 4, 64):
            X = rng.standard_normal((300, columns))
            Y = R @ X
            np.testing.assert_allclose(Y, A @ X, rtol=1e-12, atol=1e-12)
            # Only X went out, once to each node holding rows, and its jobs: far less than A.
            holding = sum(1 for rows in R.nodes.values() if rows > 0)
            assert R.last_product["bytes_to_nodes"] < holding * (X.nbytes + 4096)
            assert R.last_product["verified"]
        v = rng.standard_normal(300)
        y = R @ v
        assert y.shape == (400,)
        np.testing.assert_allclose(y, A @ v, rtol=1e-12, atol=1e-12)
        assert R.placements == 1, "placed once for every product"


def test_a_session_that_ended_places_the_matrix_again(cluster):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((120, 80))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tessera.TesseraWarning)  # so small, one node may be left out
        R = cluster.scatter(A)
    x = rng.standard_normal(80)
    np.testing.assert_allclose(R @ x, A @ x, rtol=1e-12, atol=1e-12)
    # Another kind of call ends the session the rows lived in.
    graph = tessera.directed_graph("mesh2d:10x10")
    cluster.pagerank(graph)
    np.testing.assert_allclose(R @ x, A @ x, rtol=1e-12, atol=1e-12)
    assert R.placements == 2
    R.free()
    R.free()
    with pytest.raises(tessera.InvalidInputError, match="freed"):
        R @ x


def test_bad_operands_are_refused_by_name(cluster):
    A = np.ones((10, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tessera.TesseraWarning)
        R = cluster.scatter(A)
    with R:
        with pytest.raises(tessera.InvalidInputError, match="X's rows must equal A's columns"):
            R @ np.ones((5, 2))
        with pytest.raises(tessera.InvalidInputError, match="X"):
            R @ np.array([["a"] * 2] * 6)


def test_columns_must_be_a_count(cluster):
    with pytest.raises(tessera.InvalidInputError, match="columns=0"):
        cluster.scatter(np.ones((4, 4)), columns=0)


def test_power_iteration_finds_the_dominant_eigenpair(cluster):
    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.standard_normal((200, 200)))
    eigenvalues = np.linspace(1.0, 2.0, 200)
    eigenvalues[-1] = 10.0  # a clear gap: fast convergence
    A = (Q * eigenvalues) @ Q.T
    with cluster.scatter(A) as R:
        value, vector, info = R.power_iteration(iterations=500, tol=1e-12)
    assert info["converged"]
    assert abs(value - 10.0) < 1e-9
    assert abs(abs(vector @ Q[:, -1]) - 1.0) < 1e-6
    assert info["residual"] < 1e-5
    with pytest.raises(tessera.InvalidInputError, match="square"):
        with cluster.scatter(np.ones((4, 3))) as rectangular:
            rectangular.power_iteration()


def test_conjugate_gradient_solves_an_spd_system_to_its_true_residual(cluster):
    rng = np.random.default_rng(4)
    M = rng.standard_normal((300, 300))
    A = M @ M.T + 300 * np.eye(300)
    b = rng.standard_normal(300)
    with cluster.scatter(A) as R:
        x, info = R.conjugate_gradient(b, tol=1e-10)
        assert info["converged"], info
        assert info["residual"] <= 1e-10
        np.testing.assert_allclose(A @ x, b, rtol=0, atol=1e-8)
        with pytest.raises(tessera.InvalidInputError, match="b has 5 entries"):
            R.conjugate_gradient(np.ones(5))
    with cluster.scatter(-np.eye(20)) as negative:
        with pytest.raises(tessera.InvalidInputError, match="not positive definite"):
            negative.conjugate_gradient(np.ones(20))



def test_shares_can_be_even_or_on_named_nodes_and_bad_ones_are_refused(cluster):
    rng = np.random.default_rng(7)
    A = rng.standard_normal((300, 200))
    x = rng.standard_normal(200)
    names = cluster.nodes
    with cluster.scatter(A, split="even") as even:
        assert sorted(even.nodes.values()) == [150, 150]
        assert even.placement["measuring_rounds"] == 0, "an even split is not measured"
        np.testing.assert_allclose(even @ x, A @ x, rtol=1e-12, atol=1e-12)
    with cluster.scatter(A, nodes=[names[1]]) as alone:
        assert alone.nodes == {names[0]: 0, names[1]: 300}
        np.testing.assert_allclose(alone @ x, A @ x, rtol=1e-12, atol=1e-12)
    with pytest.raises(tessera.InvalidInputError, match='split="halves": give balanced'):
        cluster.scatter(A, split="halves")
    with pytest.raises(tessera.InvalidInputError, match="no node 'nowhere' in this session"):
        cluster.scatter(A, nodes=["nowhere"])


def test_a_balanced_placement_is_measured_and_keeps_its_figures(cluster):
    rng = np.random.default_rng(8)
    A = rng.standard_normal((2000, 1000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tessera.TesseraWarning)
        R = cluster.scatter(A)
    with R:
        placement = R.placement
        assert placement["measuring_rounds"] >= 1
        # The shares kept are the last round's, or an earlier round's that was clearly (10%)
        # faster: either way within 1/0.9 of the first round's product.
        assert 0 < placement["measured_s"] < placement["first_measured_s"] / 0.9
        assert placement["bytes"] == A.nbytes + placement["bytes_moved"]
        assert sum(R.nodes.values()) == 2000
        x = rng.standard_normal(1000)
        np.testing.assert_allclose(R @ x, A @ x, rtol=1e-12, atol=1e-12)
        assert set(R.last_product["node_finish_s"]) == {name for name, rows in R.nodes.items() if rows > 0}


def test_a_node_killed_mid_run_is_replaced_on_the_others_and_told(workdir):
    own = LocalCluster(workdir, "pylost", nodes=3)
    try:
        rng = np.random.default_rng(9)
        A = rng.standard_normal((600, 400))
        x = rng.standard_normal(400)
        with own.cluster as cluster:
            R = cluster.scatter(A, split="even")
            np.testing.assert_allclose(R @ x, A @ x, rtol=1e-12, atol=1e-12)
            os.kill(own.pids[2], signal.SIGKILL)
            with pytest.warns(tessera.TesseraWarning, match="lost during a resident product"):
                y = R @ x
            np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)
            assert R.placements == 1, "the rows were placed again within the call, not from scratch"
            lost = own.cluster.nodes[2]
            assert R.nodes[lost] == 0, f"R.nodes shows where the rows are now: {R.nodes}"
            assert sum(R.nodes.values()) == 600
            R.free()
    finally:
        own.stop()


def test_a_later_session_places_the_measured_shares_from_the_nodes_stores(local):
    # The workers `up` started keep what they are sent (a store each in the run directory); the
    # first session measures its shares and remembers them; the next one on the same A places
    # them as they were, measures nothing and sends nothing.
    A = np.random.default_rng(31).standard_normal((2000, 700))
    x = np.random.default_rng(32).standard_normal(700)
    placements = []
    for _ in range(2):
        with tessera.Cluster(local.config, run_dir=local.run_dir) as cluster:
            with cluster.scatter(A) as R:
                assert np.allclose(R @ x, A @ x)
                placements.append((dict(R.placement), dict(R.nodes)))
    (first, first_nodes), (second, second_nodes) = placements
    assert not first["remembered"] and first["measuring_rounds"] > 0
    assert second["remembered"] and second["measuring_rounds"] == 0
    assert second["bytes"] == 0 and second["bytes_reused"] == A.nbytes
    assert second_nodes == first_nodes
    with tessera.Cluster(local.config, run_dir=local.run_dir) as cluster:
        with cluster.scatter(A, placement_cache="none") as R:
            assert not R.placement["remembered"], "placement_cache='none' neither reads nor writes"
