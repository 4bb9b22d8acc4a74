"""Matrix expressions from Python (cluster.array, @ + - * .T **, compute) against numpy on real
workers: integer inputs keep every product exact, so the results must equal numpy's exactly."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml

import tessera


def small_integers(rows: int, cols: int, seed: int) -> np.ndarray:
    # -2..2: powers and chains of a few products stay exact in float64.
    return np.random.default_rng(seed).integers(-2, 3, size=(rows, cols)).astype(np.float64)


def test_the_five_benchmark_shapes_equal_numpy_exactly(cluster):
    u, P = small_integers(1, 40, 1), small_integers(40, 40, 2)
    H, L = small_integers(25, 40, 3), small_integers(40, 40, 4)
    A, B, C, D = (small_integers(30, 60, 5), small_integers(60, 7, 6), small_integers(7, 45, 7),
                  small_integers(45, 3, 8))
    eu, eP, eH, eL = cluster.array(u), cluster.array(P), cluster.array(H), cluster.array(L)
    eA, eB, eC, eD = (cluster.array(m) for m in (A, B, C, D))
    I = np.eye(40)
    cases = [
        (eu @ eP ** 6, u @ np.linalg.matrix_power(P, 6)),                      # Markov chain
        (eP ** 5, np.linalg.matrix_power(P, 5)),                                # matrix power
        (eH.T @ eH @ (eH.T @ eH) @ eu.T, H.T @ H @ (H.T @ H) @ u.T),          # HITS steps
        (cluster.identity() + eL + eL ** 2 + eL ** 3, I + L + L @ L + L @ L @ L),  # Leontief series
        (eA @ eB @ eC @ eD, A @ B @ C @ D),                                     # mixed-shape chain
        (2 * (eA @ eB @ eC).T - 0.5 * (eA @ eB @ eC).T, 1.5 * (A @ B @ C).T),   # scales, transposes
    ]
    for expression, expected in cases:
        value, report = expression.compute(mode="sequence", verify="exact")
        assert value.shape == expected.shape, expression
        assert np.array_equal(value, expected), expression
        assert all(product["verified"] for product in report.products), report
        assert report.cost_evaluated["products"] == len(report.products)
        # Scheduled: tile tasks in 16 x 16 tiles, intermediates kept on the workers.
        value, report = expression.compute(tile=16, verify="exact")
        assert np.array_equal(value, expected), expression
        assert report.mode == "scheduled" and report.scheduled["tile"] == 16
        assert report.scheduled["verified"] is True
        assert report.products == []


def test_a_scheduled_run_reports_its_schedule_and_can_use_one_node(cluster):
    P = small_integers(48, 48, 11)
    value, report = (cluster.array(P) ** 4).compute(tile=16, nodes=[cluster.nodes[0]])
    assert np.array_equal(value, np.linalg.matrix_power(P, 4))
    assert [node["name"] for node in report.scheduled["nodes"]] == [cluster.nodes[0]]
    assert report.scheduled["measured_bytes"] < report.scheduled["naive_bytes"]
    assert "schedule:" in str(report) and "verified: yes" in str(report)
    # Every node asked to take part: the value is the same, and every node is in the report.
    value, report = (cluster.array(P) ** 4).compute(tile=16, every_node=True, verify="exact")
    assert np.array_equal(value, np.linalg.matrix_power(P, 4))
    assert [node["name"] for node in report.scheduled["nodes"]] == list(cluster.nodes)
    assert sum(node["tasks"] for node in report.scheduled["nodes"]) == report.scheduled["tasks"]
    with pytest.raises(tessera.InvalidInputError, match="tile must be a positive"):
        (cluster.array(P) ** 2).compute(tile=0.5)


def profile_with_every_node_like_the_first(cluster, path):
    """The cluster's saved profile with every node given the first node's figures, written to `path`:
    HEFT then spreads the tasks, however a loaded machine made one node look fast (a node forecast
    to do everything would move no tile between workers)."""
    with open(cluster.profile_path) as saved:
        profile = yaml.safe_load(saved)
    first = profile["nodes"][0]
    own = ("name", "endpoint", "fingerprint", "measured_at")
    profile["nodes"] = [{**first, **{key: node[key] for key in own if key in node}} for node in profile["nodes"]]
    with open(path, "w") as written:
        yaml.safe_dump(profile, written)
    return path


def test_tiles_between_nodes_go_worker_to_worker_or_through_the_coordinator(local, tmp_path):
    # Tiles of 256: each task's compute outweighs moving a tile, and the nodes' figures are equal,
    # so every node gets tasks and some tile must move between nodes.
    equal = profile_with_every_node_like_the_first(local.cluster, tmp_path / "equal.profile.yaml")
    with tessera.Cluster(local.config, profile_path=equal) as cluster:
        P = small_integers(768, 768, 12)
        sent = {}
        for route in ("direct", "coordinator"):
            value, report = (cluster.array(P) ** 4).compute(tile=256, every_node=True, verify="exact", tile_route=route)
            assert np.array_equal(value, np.linalg.matrix_power(P, 4)), route
            assert report.scheduled["tile_route"] == route
            peers = sum(node["peer_bytes_sent"] for node in report.scheduled["nodes"])
            assert (peers > 0) == (route == "direct"), route
            sent[route] = report.scheduled["coordinator_bytes_sent"]
        assert sent["direct"] < sent["coordinator"]
        with pytest.raises(tessera.InvalidInputError, match="tile_route: unknown tile route 'sideways'"):
            (cluster.array(P) ** 2).compute(tile_route="sideways")


def test_rewriting_is_reported_and_can_be_turned_off(cluster):
    u, P = small_integers(1, 32, 9), small_integers(32, 32, 10)
    expression = cluster.array(u) @ cluster.array(P) ** 8
    value, report = expression.compute(mode="sequence", explain=True)
    assert np.allclose(value, u @ np.linalg.matrix_power(P, 8))
    assert len(report.products) == 8  # eight vector-matrix products, not three squarings
    assert report.cost_evaluated["flops"] < report.cost_as_written["flops"]
    assert "before:" in str(report) and "total: 8 products" in str(report)
    plain, written = expression.compute(mode="sequence", rewrite=False)
    assert np.allclose(plain, value)
    assert written.rewritten is False and len(written.products) == 4  # P^2, P^4, P^8, then u @ P^8


def test_shapes_are_checked_as_the_expression_is_built(cluster):
    a, b = cluster.array(np.ones((3, 4))), cluster.array(np.ones((5, 6)))
    with pytest.raises(tessera.InvalidInputError, match="cannot multiply 3x4 by 5x6"):
        a @ b
    with pytest.raises(tessera.InvalidInputError, match="shapes must be equal"):
        a + b
    with pytest.raises(tessera.InvalidInputError, match="only a square matrix"):
        a ** 2
    with pytest.raises(tessera.InvalidInputError, match="@ for the matrix product"):
        a * b
    with pytest.raises(tessera.InvalidInputError, match="wrap arrays"):
        a @ np.ones((4, 4))
    with pytest.raises(tessera.InvalidInputError, match="has no size"):
        cluster.identity().compute()
    assert (a.T @ a).shape == (4, 4)
    assert (cluster.identity() + a.T @ a).shape == (4, 4)


def test_compute_is_evaluate_on_the_cluster_that_made_the_expression(cluster):
    P = small_integers(24, 24, 13)
    expression = cluster.array(P) ** 3
    # The arrays the text names, read-only, as the cluster reads them.
    [name] = set(re.findall(r"x\d+", expression.text))
    assert list(expression.arrays) == [name] and np.array_equal(expression.arrays[name], P)
    with pytest.raises(TypeError):
        expression.arrays[name] = P
    computed, _ = expression.compute(tile=8, verify="exact")
    evaluated, report = cluster.evaluate(expression, tile=8, verify="exact")
    assert np.array_equal(computed, evaluated) and np.array_equal(evaluated, np.linalg.matrix_power(P, 3))
    assert report.scheduled["tile"] == 8
    with pytest.raises(tessera.InvalidInputError, match="takes an Expression"):
        cluster.evaluate(P)
    with pytest.raises(tessera.InvalidInputError, match="has no size"):
        cluster.evaluate(cluster.identity())
