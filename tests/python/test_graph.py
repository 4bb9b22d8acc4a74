"""Graph algorithms on the cluster against networkx / scipy on small graphs, from every kind of
input (edge arrays, scipy.sparse, a file, a generator spec)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg

import tessera


def small_digraph(seed: int = 1, vertices: int = 120, edges: int = 480):
    """Distinct directed edges (no self-loops, no repeats) with integer weights 1..9."""
    rng = np.random.default_rng(seed)
    pairs = set()
    while len(pairs) < edges:
        u, v = (int(x) for x in rng.integers(0, vertices, 2))
        if u != v:
            pairs.add((u, v))
    src, dst = (np.array(column, dtype=np.int64) for column in zip(*sorted(pairs)))
    weights = rng.integers(1, 10, len(src)).astype(np.float64)
    return src, dst, weights, vertices


def test_pagerank_matches_networkx(cluster):
    src, dst, _, n = small_digraph(1)
    values, report = cluster.pagerank((src, dst), num_vertices=n, tolerance=1e-10, verify=True)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(zip(src.tolist(), dst.tolist()))
    expected = nx.pagerank(graph, alpha=0.85, tol=1e-12, max_iter=1000)
    assert values.shape == (n,)
    assert np.allclose(values, [expected[v] for v in range(n)], atol=1e-6)
    assert abs(values.sum() - 1.0) < 1e-9
    assert report.verification["passed"]
    assert report.algorithm["name"] == "pagerank" and report.mode == "async"
    assert report.graph["vertices"] == n and len(report.nodes) == 2
    assert report.to_dict()["totals"]["edge_updates"] == report.totals["edge_updates"] > 0


def test_katz_matches_a_linear_solve(cluster):
    src, dst, weights, n = small_digraph(2)
    adjacency = scipy.sparse.csr_matrix((weights, (src, dst)), shape=(n, n))
    beta = 0.5 / scipy.sparse.linalg.norm(adjacency, ord=1) / 2
    values, _ = cluster.katz(adjacency, beta=beta, tolerance=1e-12)
    expected = scipy.sparse.linalg.spsolve((scipy.sparse.identity(n) - beta * adjacency.T).tocsc(), np.ones(n))
    assert np.allclose(values, expected, rtol=1e-8, atol=1e-9)
    with pytest.raises(tessera.InvalidInputError, match="katz needs beta=B below 1/lambda_max"):
        cluster.katz(adjacency)


def test_connected_components_match_scipy(cluster, tmp_path):
    src, dst, _, n = small_digraph(3, vertices=200, edges=150)  # sparse: many components
    path = tmp_path / "g.edges"
    np.savetxt(path, np.stack([src, dst], axis=1), fmt="%d")
    values, report = cluster.connected_components(str(path), mode="sync")
    vertices = int(max(src.max(), dst.max())) + 1  # an edge list's vertex count
    adjacency = scipy.sparse.csr_matrix((np.ones(len(src)), (src, dst)), shape=(vertices, vertices))
    _, labels = scipy.sparse.csgraph.connected_components(adjacency, directed=True, connection="weak")
    expected = np.array([np.flatnonzero(labels == labels[v]).max() for v in range(vertices)])
    assert values.dtype == np.int64
    assert np.array_equal(values, expected)
    assert report.mode == "sync"


def test_sssp_matches_dijkstra(cluster):
    src, dst, weights, n = small_digraph(4)
    values, report = cluster.sssp((src, dst, weights), source=0, num_vertices=n, partition="hash",
                                  weights="equal")
    adjacency = scipy.sparse.csr_matrix((weights, (src, dst)), shape=(n, n))
    expected = scipy.sparse.csgraph.dijkstra(adjacency, directed=True, indices=0)
    assert np.array_equal(values, expected)  # inf where unreachable, on both sides
    assert report.partition == "hash" and report.weights == "equal"


def test_generator_spec_input(cluster):
    values, report = cluster.connected_components("mesh2d:8x8")
    assert np.all(values == 63)  # one component, labelled by its largest id
    assert report.graph["vertices"] == 64


def test_nodes_choose_who_takes_part_and_an_unknown_name_is_refused(cluster, tmp_path):
    src, dst, _, n = small_digraph(3)
    _, everyone = cluster.pagerank((src, dst), num_vertices=n, nodes="all", verify=True,
                                   placement_cache=str(tmp_path / "cache"))
    names = everyone.choice["taking_part"]
    assert len(names) == 2 and everyone.choice["mode"] == "all"
    values, alone = cluster.pagerank((src, dst), num_vertices=n, nodes=[names[1]], verify=True,
                                     placement_cache="none")
    assert alone.choice["taking_part"] == [names[1]]
    assert [node["left_out"] for node in alone.nodes] == [True, False]
    assert alone.verification["passed"] and abs(values.sum() - 1.0) < 1e-9
    assert alone.total_s >= alone.wall_s
    with pytest.raises(ValueError, match="nosuchnode"):
        cluster.pagerank((src, dst), num_vertices=n, nodes="nosuchnode")
