#!/usr/bin/env python3
"""Power iteration on a resident matrix against numpy's GEMV on one core, interleaved in one run:
five rounds of ten numpy products and ten cluster power-iteration steps on a random N x N A
placed once with cluster.scatter(A, columns=1). Prints where the rows went, the placement time,
and the median (min..max) seconds per product and per step, and their ratio.

    PYTHONPATH=build/python TESSERA_WORKER_BIN=build/bin/tessera-worker \\
        /usr/bin/python3 scripts/bench-power.py [CONFIG] [N]

Defaults: configs/local-mixed-lan.yaml, 16384 (A is 2 GiB, held once here and once on the
nodes). numpy and the coordinator's BLAS run on one thread (OPENBLAS_NUM_THREADS=1).
"""
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import tessera  # noqa: E402


def main():
    config = sys.argv[1] if len(sys.argv) > 1 else "configs/local-mixed-lan.yaml"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 16384
    rng = np.random.default_rng(5)
    A = rng.standard_normal((n, n))
    with tessera.Cluster(config) as cluster:
        cluster.profile(quick=True)
        R = cluster.scatter(A, columns=1)
        print(f"rows {R.nodes}, placed in {R.placement['seconds']:.2f} s; {R.placement}")
        v = rng.standard_normal(n)
        v /= np.linalg.norm(v)
        local, steps = [], []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(10):
                A @ v
            local.append((time.perf_counter() - start) / 10)
            _, _, info = R.power_iteration(iterations=10, tol=1e-300)
            steps.append(info["seconds"] / (info["iterations"] + 1))  # + the residual's product
        R.free()
    numpy_s, step_s = statistics.median(local), statistics.median(steps)
    print(f"numpy-1core GEMV {numpy_s:.4f} s ({min(local):.4f}..{max(local):.4f}) per product")
    print(f"cluster power step {step_s:.4f} s ({min(steps):.4f}..{max(steps):.4f}); ratio {step_s / numpy_s:.2f}")


if __name__ == "__main__":
    main()
