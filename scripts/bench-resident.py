#!/usr/bin/env python3
"""The repeated thin product, three ways, interleaved in one run: A (N x N) times CALLS different
X (N x COLS) with numpy on one core, with cluster.multiply(A, X) (A shipped every call), and with
R = cluster.scatter(A) once, then R @ X (only X and the product's rows travel). Prints the median
and min..max seconds per product of each, the resident placement's cost, and the ratios.

    PYTHONPATH=build/python TESSERA_WORKER_BIN=build/bin/tessera-worker \\
        /usr/bin/python3 scripts/bench-resident.py [CONFIG] [N] [COLS] [ROUNDS]

Defaults: configs/local-mixed-lan.yaml, 4096, 64, 5 rounds of 5 calls. numpy and the
coordinator's BLAS run on one thread (OPENBLAS_NUM_THREADS=1, set before numpy loads), so the
numpy figure is one core's, as the comparison says.
"""
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import tessera  # noqa: E402


def spread(samples):
    return f"{statistics.median(samples):.4f} s ({min(samples):.4f}..{max(samples):.4f})"


def main():
    config = sys.argv[1] if len(sys.argv) > 1 else "configs/local-mixed-lan.yaml"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    cols = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    calls = 5
    rng = np.random.default_rng(1)
    A = rng.standard_normal((n, n))
    blocks = [rng.standard_normal((n, cols)) for _ in range(calls)]
    times = {"numpy-1core": [], "multiply": [], "resident": []}
    with tessera.Cluster(config) as cluster:
        cluster.profile(quick=True)
        R = cluster.scatter(A, columns=cols)
        print(f"placed {n}x{n} on {R.nodes} in {R.placement['seconds']:.3f} s ({R.placement['bytes'] / 1e6:.0f} MB), "
              f"product forecast {R.placement['forecast_s']:.4f} s")
        for reason in R.placement["left_out"]:
            print(f"  {reason}")
        for _ in range(rounds):
            for X in blocks:
                start = time.perf_counter()
                expected = A @ X
                times["numpy-1core"].append(time.perf_counter() - start)
                start = time.perf_counter()
                C, _ = cluster.multiply(A, X)
                times["multiply"].append(time.perf_counter() - start)
                start = time.perf_counter()
                Y = R @ X
                times["resident"].append(time.perf_counter() - start)
                assert np.allclose(C, expected) and np.allclose(Y, expected)
        last = R.last_product
        print(f"last resident product: {last['seconds']:.4f} s on the nodes, {last['bytes_to_nodes'] / 1e6:.2f} MB out, "
              f"{last['bytes_from_nodes'] / 1e6:.2f} MB back, check {last['verification_seconds'] * 1e3:.2f} ms; "
              f"placements {R.placements}")
        R.free()
    for name, samples in times.items():
        print(f"{name:<12} {spread(samples)} per product ({len(samples)} products)")
    numpy_s = statistics.median(times["numpy-1core"])
    for name in ("multiply", "resident"):
        print(f"{name} / numpy-1core: {statistics.median(times[name]) / numpy_s:.2f}x")
    break_even = R.placement["seconds"] / max(1e-9, statistics.median(times["multiply"]) - statistics.median(times["resident"]))
    print(f"placement pays for itself after {break_even:.1f} products against cluster.multiply")


if __name__ == "__main__":
    main()
