"""Cluster.multiply against numpy on real workers: exact results, the array rule, out=, zero copy,
Ctrl-C, progress and the report."""

from __future__ import annotations

import _thread
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tessera


def integer_matrix(rows: int, cols: int, seed: int) -> np.ndarray:
    # Integers in [-8, 8]: every product and sum is exact in float64, so C must equal A @ B exactly.
    return np.random.default_rng(seed).integers(-8, 9, size=(rows, cols)).astype(np.float64)


def test_integer_product_equals_numpy_exactly(cluster):
    a = integer_matrix(301, 257, 1)
    b = integer_matrix(257, 199, 2)
    c, report = cluster.multiply(a, b, verify="exact")
    assert c.shape == (301, 199) and c.dtype == np.float64
    assert np.array_equal(c, a @ b)
    assert report.verified is True
    assert report.verification["mode"] == "exact"
    assert (report.m, report.n, report.k) == (301, 199, 257)
    assert sum(node["rows"] for node in report.nodes) == 301


def test_b_forwarded_along_a_chain_gives_the_exact_product(cluster):
    a = integer_matrix(120, 160, 5)
    b = integer_matrix(160, 90, 6)
    plan = cluster.plan(120, 90, 160, policy="even", distribution="chain", panel_width=32)
    assert plan.to_dict()["distribution"] == "chain" and len(plan.to_dict()["chain"]) >= 2
    c, report = cluster.multiply(a, b, policy="even", distribution="chain", panel_width=32, verify="exact")
    assert np.array_equal(c, a @ b)
    document = report.to_dict()
    assert document["distribution"] == "chain" and document["chain"].startswith("coordinator -> ")
    assert sum(node["panels"] for node in document["nodes"]) == 160 // 32  # B left the coordinator once
    # A plan carries its chain through to_dict / from_dict and runs as it is.
    c2, again = cluster.multiply(a, b, plan=tessera.Plan.from_dict(plan.to_dict()), verify="exact")
    assert np.array_equal(c2, a @ b) and again.to_dict()["distribution"] == "chain"
    with pytest.raises(tessera.InvalidInputError, match="distribution 'ring'"):
        cluster.multiply(a, b, distribution="ring")
    with pytest.raises(tessera.InvalidInputError, match="dynamic"):
        cluster.multiply(a, b, policy="dynamic", distribution="chain")
    # The 2d layout: a chain per group of columns, exact; 3d has none to chain.
    c3, two_d = cluster.multiply(a, b, policy="even", layout="2d", distribution="chain", panel_width=32, verify="exact")
    assert np.array_equal(c3, a @ b) and two_d.to_dict()["distribution"] == "chain"
    with pytest.raises(tessera.InvalidInputError, match="3d"):
        cluster.multiply(a, b, policy="even", layout="3d", distribution="chain")


def test_report_has_the_json_fields_as_attributes_and_dict(cluster):
    a = integer_matrix(64, 32, 3)
    b = integer_matrix(32, 48, 4)
    _, report = cluster.multiply(a, b, policy="even")
    document = report.to_dict()
    for key in ("policy", "m", "n", "k", "makespan_s", "gflops", "imbalance", "verified", "verification", "nodes",
                "predicted_makespan_s", "cluster", "layout", "lost_nodes"):
        assert key in document
        assert getattr(report, key) == document[key]
    assert report.policy == "even"
    assert json.loads(json.dumps(document)) == document
    assert "node1" in str(report) and "node2" in str(report)  # the CLI's table
    assert "verified" in repr(report)
    assert report.plan.policy == "even" and report.plan.m == 64
    # Where the call's time went: measured in C++ and, for the whole call, here.
    for key in ("call_s", "input_check_s", "session_open_s", "driver_s", "session_close_s"):
        assert report.timing[key] >= 0.0, key
    assert report.timing["call_s"] >= report.timing["driver_s"]


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.astype(np.float32),                 # another dtype
        lambda a: np.asfortranarray(a),                 # Fortran order
        lambda a: np.repeat(a, 2, axis=1)[:, ::2],      # a strided view
        lambda a: a.astype(np.int32),                   # integers
    ],
    ids=["float32", "fortran", "strided", "int32"],
)
def test_other_arrays_are_converted_by_one_copy(cluster, make):
    a = integer_matrix(40, 30, 5)
    b = integer_matrix(30, 20, 6)
    converted = make(a)
    c, _ = cluster.multiply(converted, b, verify="exact")
    assert np.array_equal(c, a @ b)
    with pytest.raises(tessera.InvalidInputError, match="allow_copy=False"):
        cluster.multiply(converted, b, allow_copy=False)


def test_arrays_that_cannot_be_real_matrices_are_refused(cluster):
    b = integer_matrix(3, 3, 7)
    with pytest.raises(tessera.InvalidInputError, match="dtype complex128"):
        cluster.multiply(np.ones((3, 3), dtype=complex), b)
    with pytest.raises(tessera.InvalidInputError, match="2-D"):
        cluster.multiply(np.ones(3), b)
    with pytest.raises(tessera.InvalidInputError, match="A's columns must equal B's rows"):
        cluster.multiply(np.ones((3, 4)), b)
    nan = np.ones((3, 3))
    nan[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"A\[1\]\[2\] is NaN .*allow_nonfinite=True"):
        cluster.multiply(nan, b)


def test_a_product_that_overflows_fails_verification_in_every_mode(cluster):
    # Issue 40: finite inputs whose product overflows are not verified by either check.
    a = np.full((20, 10), 1.7e308)
    b = np.ones((10, 6))
    for verify in ("freivalds", "exact"):
        with pytest.raises(tessera.VerificationError, match=r"the product overflowed.*C\[0\]\[0\] is \+inf") as caught:
            cluster.multiply(a, b, verify=verify, policy="even")
        assert caught.value.report.verified is False
        assert np.isinf(caught.value.result).all()


def test_out_receives_the_product_in_place(cluster):
    a = integer_matrix(50, 40, 8)
    b = integer_matrix(40, 30, 9)
    out = np.full((50, 30), -1.0)
    c, _ = cluster.multiply(a, b, out=out, verify="exact")
    assert c is out
    assert np.array_equal(out, a @ b)
    for bad, message in [
        (np.empty((30, 50)), "shape"),
        (np.empty((50, 30), dtype=np.float32), "float64"),
        (np.empty((30, 50)).T, "C-contiguous"),
    ]:
        with pytest.raises(tessera.InvalidInputError, match=message):
            cluster.multiply(a, b, out=bad)
    square = integer_matrix(30, 30, 18)
    with pytest.raises(tessera.InvalidInputError, match="overlaps"):
        cluster.multiply(square, square, out=square)
    read_only = np.empty((50, 30))
    read_only.flags.writeable = False
    with pytest.raises(tessera.InvalidInputError, match="read-only"):
        cluster.multiply(a, b, out=read_only)


def test_progress_is_called_with_jobs_per_node(cluster):
    seen = []
    a = integer_matrix(256, 512, 10)
    b = integer_matrix(512, 256, 11)
    cluster.multiply(a, b, panel_width=64, progress=seen.append)
    assert seen, "progress was never called"
    assert set(seen[-1]) <= {"node1", "node2"}


ZERO_COPY_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tessera

    def peak_rss():
        # VmHWM: this process image's peak resident set (ru_maxrss would also count the RSS the
        # parent had when it forked us).
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024

    config, run_dir, dtype = sys.argv[1], sys.argv[2], sys.argv[3]
    cluster = tessera.Cluster(config, run_dir=run_dir)
    a = np.ones((8192, 1024), dtype=dtype)           # 64 MiB as float64
    b = np.ones((1024, 8), dtype=np.float64)
    out = np.empty((8192, 8))
    cluster.multiply(np.ones((64, 1024)), b, verify="none", policy="even")  # warm up: threads, buffers
    before = peak_rss()
    c, _ = cluster.multiply(a, b, out=out, verify="none", policy="even")
    after = peak_rss()
    assert (c == 1024.0).all()
    print(json.dumps({"a_bytes": 8192 * 1024 * 8, "growth": after - before}))
    """
)


def peak_growth(local, dtype: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", ZERO_COPY_SCRIPT, local.config, local.run_dir, dtype],
        capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_float64_input_is_not_copied_peak_rss(local):
    # Peak RSS of a process multiplying a 64 MiB A: reading it in place adds far less than A's
    # size; the float32 control (converted by one copy) shows that a copy would be seen.
    in_place = peak_growth(local, "float64")
    assert in_place["growth"] < in_place["a_bytes"] / 4, in_place
    converted = peak_growth(local, "float32")
    assert converted["growth"] >= in_place["a_bytes"] * 0.9, converted


def test_keyboard_interrupt_cancels_the_run_and_the_next_call_works(cluster):
    a = np.random.default_rng(12).random((3072, 3072))
    b = np.random.default_rng(13).random((3072, 3072))
    # How long the full run takes, to show the interrupt cut it short.
    start = time.monotonic()
    cluster.multiply(a, b, verify="none")
    full = time.monotonic() - start

    timer = threading.Timer(full / 4, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        cluster.multiply(a, b, verify="none")
    interrupted = time.monotonic() - start
    timer.join()
    assert interrupted < 0.75 * full, (interrupted, full)

    # The workers' sessions were closed: the next run is served at once.
    small_a = integer_matrix(64, 64, 14)
    small_b = integer_matrix(64, 64, 15)
    start = time.monotonic()
    c, report = cluster.multiply(small_a, small_b, verify="exact")
    assert time.monotonic() - start < 5.0
    assert np.array_equal(c, small_a @ small_b) and report.verified
    status = cluster.status()
    assert all(node["reachable"] for node in status)
    # Every worker reports its host's load average, as `tessera status` shows it beside the cores.
    assert all(isinstance(node["load"], float) and node["load"] >= 0.0 for node in status)
    assert all(isinstance(node["cores"], int) and node["cores"] >= 1 for node in status)


def test_keep_connected_reopens_after_an_interrupt(local):
    kept = tessera.Cluster(local.config, run_dir=local.run_dir, keep_connected=True)
    try:
        a = integer_matrix(128, 128, 16)
        c, _ = kept.multiply(a, a)
        assert np.array_equal(c, a @ a)
        # Long enough that the interrupt lands inside it on a quiet machine too (2048 could end first).
        big = np.random.default_rng(17).random((4096, 4096))
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            kept.multiply(big, big, verify="none")
        timer.join()
        c, _ = kept.multiply(a, a)
        assert np.array_equal(c, a @ a)
    finally:
        kept.close()
