"""tessera.partition against `tessera partition` on the same inputs."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import scipy.io
import scipy.sparse

import tessera
from conftest import run_cli


def cli_partition(cli, folder, input_path, *flags):
    parts_path = os.path.join(folder, "parts.txt")
    report_path = os.path.join(folder, "report.json")
    run_cli(cli, "partition", input_path, *flags, "--out", parts_path, "--report", report_path)
    parts = np.loadtxt(parts_path, dtype=np.int32)
    with open(report_path) as file:
        return parts, json.load(file)


def assert_same(result, parts, report):
    assert np.array_equal(result.parts, parts)
    for key in ("imbalance", "max_target_deviation", "edge_cut", "comm_volume", "total_weight", "note"):
        assert getattr(result, key) == report[key], key
    assert [p["weight"] for p in result.part_figures] == [p["weight"] for p in report["parts"]]
    assert [p["vertices"] for p in result.part_figures] == [p["vertices"] for p in report["parts"]]


@pytest.mark.parametrize("method", ["metis", "contiguous", "hash"])
def test_sparse_matrix_partitions_like_its_mtx_file(tmp_path, cli, method):
    matrix = scipy.sparse.random(300, 300, density=0.02, random_state=3, format="csr")
    matrix = matrix + matrix.T + scipy.sparse.identity(300)
    path = str(tmp_path / "m.mtx")
    scipy.io.mmwrite(path, matrix)
    result = tessera.partition(matrix, [1, 2, 3], method=method)
    parts, report = cli_partition(cli, str(tmp_path), path, "--weights", "1", "2", "3", "--method", method)
    assert_same(result, parts, report)
    assert result.vertices == 300 and len(result.parts) == 300
    assert set(np.unique(result.parts)) <= {0, 1, 2}


def test_rectangular_matrix_uses_the_row_net_model(tmp_path, cli):
    matrix = scipy.sparse.random(120, 40, density=0.05, random_state=5, format="coo")
    path = str(tmp_path / "r.mtx")
    scipy.io.mmwrite(path, matrix)
    result = tessera.partition(matrix, [1, 1])
    parts, report = cli_partition(cli, str(tmp_path), path, "--weights", "1", "1")
    assert_same(result, parts, report)


def test_edge_arrays_partition_like_an_edge_list(tmp_path, cli):
    rng = np.random.default_rng(9)
    src = rng.integers(0, 200, 800)
    dst = rng.integers(0, 200, 800)
    path = str(tmp_path / "g.edges")
    np.savetxt(path, np.stack([src, dst], axis=1), fmt="%d")
    result = tessera.partition((src, dst), [2, 1], num_vertices=int(max(src.max(), dst.max())) + 1, seed=4)
    parts, report = cli_partition(cli, str(tmp_path), path, "--weights", "2", "1", "--seed", "4")
    assert_same(result, parts, report)
    assert result.build["self_loops_removed"] == int(np.sum(src == dst))


def test_generator_spec_and_cluster_weights(cluster, cli):
    result = tessera.partition("mesh2d:30x30", cluster)
    parts, report = cli_partition(cli, os.path.dirname(cluster.config_path), "mesh2d:30x30", "--cluster",
                                  cluster.config_path)
    assert_same(result, parts, report)
    assert [p["name"] for p in result.part_figures] == ["node1", "node2"]
    # A Cluster's parts are its profile_weights(): the same targets as a list give the same parts.
    names, weights = cluster.profile_weights()
    assert names == cluster.nodes
    measured = {node["name"]: node["gflops"] for node in cluster.saved_profile()["nodes"]}
    assert weights == [measured[name] for name in names]
    assert np.array_equal(tessera.partition("mesh2d:30x30", weights).parts, result.parts)


def test_bad_weights_are_invalid_input():
    with pytest.raises(tessera.InvalidInputError):
        tessera.partition("mesh2d:4x4", [1, -1])
    with pytest.raises(ValueError, match="--method|metis"):
        tessera.partition("mesh2d:4x4", [1, 1], method="best")
