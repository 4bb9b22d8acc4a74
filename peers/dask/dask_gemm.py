#!/usr/bin/python3
"""Dask peer of `tessera multiply`: C = A x B (n x n, float64) on a running dask.distributed
cluster, once per chunk size, from a client in the root network namespace.

The client holds A and B as numpy arrays (uniform in [-1, 1), numpy's default generator seeded
with --seed; Tessera's own generator is a C++ std::mt19937_64 that numpy does not offer), wraps
them with da.from_array (which slices numpy inputs into chunks in the graph, so every chunk
travels client -> scheduler -> the worker the scheduler picks) and calls (A @ B).compute(), which
brings C back to the client as one numpy array. That call is timed (end_to_end_s: from building
the graph until C is in the client's memory, like Tessera's makespan; input generation and the
check are outside). C is then checked with Freivalds' test within the bound Tessera's verifier
uses (balance/run/src/verify.cpp); a wrong product exits 3.

Prints one line per chunk size:
  RESULT n=.. chunk=.. end_to_end_s=.. verified=yes|no worst_ratio=.. workers=..

Usage: dask_gemm.py SCHEDULER --n N --chunks 512 1024 2048 [--workers 4] [--seed 1] [--corrupt]
"""
import argparse
import sys
import time
import warnings

import dask.array as da
import numpy as np
from distributed import Client


def freivalds_worst_ratio(a, b, c, seed, rounds=2):
    """Worst |Cx - A(Bx)|_i / (4 (k + n + 2) u (|A|(|B||x|))_i) over `rounds` random x; <= 1 passes."""
    n, k = c.shape[1], a.shape[1]
    factor = 4.0 * (k + n + 2) * (np.finfo(np.float64).eps / 2)
    rng = np.random.default_rng(seed ^ 0x9E3779B97F4A7C15)
    abs_a, abs_b = np.abs(a), np.abs(b)
    worst = 0.0
    for _ in range(rounds):
        x = rng.uniform(-1.0, 1.0, n)
        difference = np.abs(c @ x - a @ (b @ x))
        bound = factor * (abs_a @ (abs_b @ np.abs(x)))
        if not np.all(np.isfinite(difference)):
            return float("inf")
        worst = max(worst, float(np.max(difference / bound)))
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scheduler", help="scheduler address, e.g. tcp://127.0.0.1:7620")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--chunks", type=int, nargs="+", required=True, help="square chunk sizes to run, in order")
    parser.add_argument("--workers", type=int, default=4, help="wait for this many workers before starting")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corrupt", action="store_true", help="perturb one entry of C before the check (must fail)")
    args = parser.parse_args()

    # Chunks of A and B sit in the graph; at n = 4096 Dask warns about the graph's size each time.
    warnings.filterwarnings("ignore", message=".*Large object of size.*")
    warnings.filterwarnings("ignore", message=".*Sending large graph of size.*")

    rng = np.random.default_rng(args.seed)
    a = rng.uniform(-1.0, 1.0, (args.n, args.n))
    b = rng.uniform(-1.0, 1.0, (args.n, args.n))

    failed = False
    with Client(args.scheduler, timeout=60) as client:
        client.wait_for_workers(args.workers, timeout=120)
        workers = len(client.scheduler_info()["workers"])
        # Fresh worker processes: one small untimed product first, so that no timed run pays for
        # importing and warming up NumPy / OpenBLAS on the workers (Tessera's workers are warm too).
        warm = da.ones((256, 256), chunks=128)
        (warm @ warm).compute()
        for chunk in args.chunks:
            start = time.perf_counter()
            product = (da.from_array(a, chunks=chunk) @ da.from_array(b, chunks=chunk)).compute()
            elapsed = time.perf_counter() - start
            if args.corrupt:
                product[args.n // 2, args.n // 3] += 1e-3
            worst = freivalds_worst_ratio(a, b, product, args.seed)
            verified = worst <= 1.0
            failed = failed or not verified
            print(f"RESULT n={args.n} chunk={chunk} end_to_end_s={elapsed:.6f} verified={'yes' if verified else 'no'} "
                  f"worst_ratio={worst:.3g} workers={workers}", flush=True)
            del product
    if failed:
        print("dask_gemm: C fails Freivalds' test", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
