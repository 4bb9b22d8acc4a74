#!/usr/bin/env python3
"""A warm block store against a cold one, interleaved in one run: for each round a fresh N x N
matrix is placed in a new session (cold: no node has seen it), then the same matrix again in
another new session (warm: the nodes' block stores kept its pieces). Prints each placement's
seconds, bytes sent and bytes the stores had, the medians with min..max, and the warm/cold
ratios the resident issue targets (bytes at most 1%, time at most a tenth). Every placement is
checked by one product against numpy.

    tessera up CONFIG   # workers with a store each (the run directory's NODE.store)
    PYTHONPATH=build/python TESSERA_WORKER_BIN=build/bin/tessera-worker \\
        /usr/bin/python3 scripts/bench-warm-store.py [CONFIG] [N] [ROUNDS] [MEASURE]

Defaults: configs/local-mixed-lan.yaml, 16384, 3 rounds, measure=1 (the placement measures its
shares on the placed rows, as cluster.scatter does by default; 0 places by the profile alone).
"""
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import tessera  # noqa: E402


def spread(samples, unit="s", scale=1.0):
    values = [v * scale for v in samples]
    return f"{statistics.median(values):.3f} {unit} ({min(values):.3f}..{max(values):.3f})"


def place(config, A, measure):
    with tessera.Cluster(config) as cluster:
        start = time.perf_counter()
        R = cluster.scatter(A, measure=measure)
        wall = time.perf_counter() - start
        x = np.random.default_rng(7).standard_normal(A.shape[1])
        assert np.allclose(R @ x, A @ x), "the placed matrix's product differs from numpy's"
        return wall, R.placement["bytes"], R.placement["bytes_reused"], dict(R.nodes)


def main():
    config = sys.argv[1] if len(sys.argv) > 1 else "configs/local-mixed-lan.yaml"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 16384
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    measure = (sys.argv[4] if len(sys.argv) > 4 else "1") != "0"
    with tessera.Cluster(config) as cluster:
        cluster.profile(quick=True)
    runs = {"cold": [], "warm": []}
    for round_index in range(rounds):
        A = np.random.default_rng(1000 + round_index + int(time.time())).standard_normal((n, n))
        for kind in ("cold", "warm"):
            wall, sent, reused, nodes = place(config, A, measure)
            runs[kind].append((wall, sent, reused))
            print(f"round {round_index + 1} {kind}: {wall:.3f} s, {sent / 1e6:.1f} MB sent, "
                  f"{reused / 1e6:.1f} MB from the stores, rows {nodes}", flush=True)
    for kind, samples in runs.items():
        print(f"{kind}: placement {spread([s[0] for s in samples])}, sent {spread([s[1] for s in samples], 'MB', 1e-6)}")
    time_ratios = [w[0] / c[0] for c, w in zip(runs["cold"], runs["warm"])]
    byte_ratios = [w[1] / c[1] for c, w in zip(runs["cold"], runs["warm"])]
    print(f"warm/cold per round: time {spread(time_ratios, 'x')}, bytes {spread(byte_ratios, 'x')} "
          f"(targets: time <= 0.1, bytes <= 0.01)")


if __name__ == "__main__":
    main()
