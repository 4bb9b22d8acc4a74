#!/usr/bin/env python3
"""Multiply two numpy arrays on a local Tessera cluster and print the verified report.

Run from the repository root after installing the package (docs/python.md, "Install"):

    .venv/bin/python examples/multiply.py                      # configs/local.yaml, n = 2048
    .venv/bin/python examples/multiply.py configs/local.yaml 4096

Starts the cluster's workers (and stops them again at the end, unless they were already
running), measures a quick profile if none is saved, multiplies, checks the product against
numpy, and prints the report table.
"""

import os
import sys
import time

import numpy as np

import tessera


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    config = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "configs", "local.yaml")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2048

    with tessera.Cluster(config) as cluster:
        for node in cluster.status():
            print(f"{node['name']:<12} {node['endpoint']:<22} {'reachable' if node['reachable'] else 'UNREACHABLE'}")
        if cluster.saved_profile() is None:
            print("no profile yet; measuring a quick one")
        profile = cluster.profile(quick=True)
        for node in profile["nodes"]:
            print(f"{node['name']:<12} {node['gflops']:8.2f} GFLOP/s  share {node['relative_power']:.3f}")

        rng = np.random.default_rng(1)
        a = rng.random((n, n))
        b = rng.random((n, n))
        start = time.perf_counter()
        c, report = cluster.multiply(a, b)  # policy "proportional", Freivalds verification
        seconds = time.perf_counter() - start
        print(report)
        print(repr(report))
        error = np.max(np.abs(c - a @ b))
        print(f"call took {seconds:.3f} s; max |C - numpy| = {error:.3g}")
        return 0 if report.verified and error < 1e-9 * n else 1


if __name__ == "__main__":
    sys.exit(main())
