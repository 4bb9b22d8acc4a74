#!/usr/bin/python3
"""Dask peer of `tessera multiply`: C = A x B (n x n, float64) on a running dask.distributed
cluster, once per variant, from a client in the root network namespace.

The client holds A and B as numpy arrays (uniform in [-1, 1), numpy's default generator seeded
with --seed; Tessera's own generator is a C++ std::mt19937_64 that numpy does not offer). A
variant says how they reach the workers and how C comes back:

  CHUNKS[:OPTION+...]   CHUNKS is a square chunk size ("1024") or RxKxC ("512x4096x4096": A in
                        R x K chunks, B in K x C, so C in R x C; K = n leaves no sum to reduce)
  options:  direct      the client gathers C straight from the workers
                        (Client(direct_to_workers=True)); without it C travels worker ->
                        scheduler -> client, Dask's default for a client outside the cluster
            scatter     A's and B's chunks go client -> workers with client.scatter (spread
                        evenly); without it da.from_array puts them in the graph, so every chunk
                        travels client -> scheduler -> the worker the scheduler picks
            finalize    C comes back as client.compute(A @ B) returns it: Dask appends one
                        `finalize` task that concatenates all of C's blocks on one worker (the
                        scheduler's pick, often a throttled Pi), which then sends C whole; without
                        it (the default since 2026-11-27) the client gathers C's blocks themselves
                        (one future per block) and assembles C with np.block, as Tessera's
                        coordinator assembles C from the nodes' pieces. Earlier runs all used
                        the finalize path.

Work stealing stays as shipped (on). Before the timed products the workers are warmed with one
untimed product of the same size (the first variant), so no timed run pays for imports, NumPy /
OpenBLAS start-up or first-touch memory on the workers (Tessera's workers are warm too).

Per variant, two timings:
  end_to_end_s  from handing the inputs to Dask until C is in the client's memory, like Tessera's
                makespan (input generation and the check are outside);
  compute_s     A and B first persisted on the workers (untimed), then (A @ B).persist() until
                every block of C exists on some worker (C is not gathered): the multiply alone on
                distributed data, like pdgemm alone.
C of the end-to-end run is checked with Freivalds' test within the bound Tessera's verifier uses
(balance/multiply/src/verify.cpp); a wrong product exits 3.

Per timed product the task stream (distributed's get_task_stream) and the scheduler's "stealing"
events are recorded: per worker, the tasks it computed by key prefix, their compute and transfer
seconds, its first and last task's start/end from the product's first task, and the tasks work
stealing moved to / from it (confirmed steals).

Prints per variant:
  RESULT n=.. variant=.. end_to_end_s=.. compute_s=.. verified=yes|no worst_ratio=.. workers=..
  WORKER variant=.. phase=end_to_end|compute name=.. cpu_s=.. throttled_s=.. nr_throttled=..
  TASKS variant=.. phase=.. name=.. tasks=PREFIX:COUNT+... compute_s=.. transfer_s=.. first_s=.. last_s=..
        stolen_to=.. stolen_from=..
(cpu_s: the worker process's CPU time during that timed product; throttled_s: its node cgroup's
throttled time meanwhile, from cpu.stat, when --cgroups names the cgroups).

Usage: dask_gemm.py SCHEDULER --n N --variants 1024 1024:direct 512:direct+scatter ... [--workers 4] [--seed 1]
                    [--cgroups name=DIR,...] [--corrupt]
"""
import argparse
import os
import sys
import time
import warnings

import dask.array as da
import numpy as np
from dask.utils import key_split
from collections import defaultdict

from distributed import Client, get_task_stream, wait


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


def parse_variant(text, n):
    """'1024' or '512x4096x4096' plus ':direct+scatter' -> (a_chunks, b_chunks, options)."""
    chunks, _, options = text.partition(":")
    sizes = [int(x) for x in chunks.split("x")]
    if len(sizes) == 1:
        sizes *= 3
    if len(sizes) != 3 or min(sizes) < 1:
        sys.exit(f"dask_gemm: bad variant {text!r}: CHUNKS is C or RxKxC")
    r, k, c = (min(s, n) for s in sizes)
    flags = set(filter(None, options.split("+")))  # no commas: variants are CSV cells
    unknown = flags - {"direct", "scatter", "finalize"}
    if unknown:
        sys.exit(f"dask_gemm: bad variant {text!r}: unknown option(s) {sorted(unknown)}; "
                 "valid: direct, scatter, finalize")
    return (r, k), (k, c), flags


def scattered_array(client, matrix, chunks):
    """A dask array over chunks of `matrix` that client.scatter has put on the workers."""
    rows, cols = matrix.shape
    starts_r, starts_c = range(0, rows, chunks[0]), range(0, cols, chunks[1])
    pieces = [np.ascontiguousarray(matrix[i:i + chunks[0], j:j + chunks[1]]) for i in starts_r for j in starts_c]
    futures = client.scatter(pieces, direct=True, hash=False)
    it = iter(zip(futures, pieces))
    grid = []
    for _ in starts_r:
        row = []
        for _ in starts_c:
            future, piece = next(it)
            row.append(da.from_delayed(future, shape=piece.shape, dtype=piece.dtype))
        grid.append(row)
    return da.block(grid)


def throttled(cgroups):
    """{name: (throttled_s, nr_throttled)} from each node cgroup's cpu.stat."""
    result = {}
    for name, directory in cgroups.items():
        stat = {}
        try:
            with open(os.path.join(directory, "cpu.stat"), encoding="utf-8") as f:
                for line in f:
                    key, value = line.split()
                    stat[key] = int(value)
        except OSError:
            continue
        usec = "throttled_usec" in stat  # cgroup v2 counts microseconds, v1 nanoseconds
        result[name] = (stat.get("throttled_usec", 0) * 1e-6 if usec else stat.get("throttled_time", 0) * 1e-9,
                        stat.get("nr_throttled", 0))
    return result


class Probe:
    """Each worker's CPU time and each node cgroup's throttling around one timed product."""

    def __init__(self, client, cgroups):
        self.client, self.cgroups = client, cgroups

    def __enter__(self):
        self.cpu = self.client.run(time.process_time)
        self.throttle = throttled(self.cgroups)
        self.steals_before = len(self.client.get_events("stealing"))
        self.stream = get_task_stream(self.client)
        self.stream.__enter__()
        return self

    def __exit__(self, *exc):
        self.stream.__exit__(*exc)
        self.cpu_after = self.client.run(time.process_time)
        self.throttle_after = throttled(self.cgroups)
        self.steals = [msg for _, msg in self.client.get_events("stealing")[self.steals_before:]]

    def task_lines(self, variant, phase):
        """Per worker: the tasks it computed (by key prefix), their compute and transfer seconds,
        the span from its first task's start to its last's end, and the steals it gained/lost."""
        names = {a: w.get("name", a) for a, w in self.client.scheduler_info()["workers"].items()}
        counts = defaultdict(lambda: defaultdict(int))
        busy, moved, first, last = defaultdict(float), defaultdict(float), {}, {}
        for record in self.stream.data:
            worker = record["worker"]
            for piece in record["startstops"]:
                if piece["action"] == "compute":
                    counts[worker][key_split(record["key"])] += 1
                    busy[worker] += piece["stop"] - piece["start"]
                elif piece["action"] == "transfer":
                    moved[worker] += piece["stop"] - piece["start"]
                first[worker] = min(first.get(worker, piece["start"]), piece["start"])
                last[worker] = max(last.get(worker, piece["stop"]), piece["stop"])
        gained, lost = defaultdict(int), defaultdict(int)
        for msg in self.steals:
            if msg and msg[0] == "confirm":  # ("confirm", key, state, victim, thief, stimulus_id)
                lost[msg[3]] += 1
                gained[msg[4]] += 1
        start = min(first.values(), default=0.0)
        for address in sorted(names, key=lambda a: str(names[a])):
            tasks = "+".join(f"{k}:{v}" for k, v in sorted(counts[address].items())) or "none"
            yield (f"TASKS variant={variant} phase={phase} name={names[address]} tasks={tasks} "
                   f"compute_s={busy[address]:.3f} transfer_s={moved[address]:.3f} "
                   f"first_s={first.get(address, start) - start:.3f} last_s={last.get(address, start) - start:.3f} "
                   f"stolen_to={gained[address]} stolen_from={lost[address]}")

    def lines(self, variant, phase):
        names = self.client.scheduler_info()["workers"]
        for address, cpu_after in sorted(self.cpu_after.items()):
            name = names.get(address, {}).get("name", address)
            cpu = cpu_after - self.cpu.get(address, cpu_after)
            t0, n0 = self.throttle.get(str(name), (0.0, 0))
            t1, n1 = self.throttle_after.get(str(name), (0.0, 0))
            yield (f"WORKER variant={variant} phase={phase} name={name} cpu_s={cpu:.3f} "
                   f"throttled_s={t1 - t0:.3f} nr_throttled={n1 - n0}")


def multiply_end_to_end(client, a, b, a_chunks, b_chunks, flags):
    if "scatter" in flags:
        left, right = scattered_array(client, a, a_chunks), scattered_array(client, b, b_chunks)
    else:
        left, right = da.from_array(a, chunks=a_chunks), da.from_array(b, chunks=b_chunks)
    product = left @ right
    direct = True if "direct" in flags else None
    if "finalize" in flags:
        # client.compute of the array appends one `finalize` task that concatenates every block of
        # C on whichever worker the scheduler picks (possibly a throttled Pi), then ships C whole.
        return client.gather(client.compute(product), direct=direct)
    # One future per block of C, gathered from the workers that hold them and assembled here, as
    # Tessera's coordinator assembles C from the nodes' pieces.
    blocks = product.to_delayed()
    futures = client.compute(blocks.ravel().tolist())
    gathered = client.gather(futures, direct=direct)
    rows, cols = blocks.shape
    return np.block([[gathered[i * cols + j] for j in range(cols)] for i in range(rows)])


def multiply_in_place(client, a, b, a_chunks, b_chunks, probe):
    """Seconds for (A @ B).persist() on inputs already on the workers; C stays there."""
    left, right = client.persist([da.from_array(a, chunks=a_chunks), da.from_array(b, chunks=b_chunks)])
    wait([left, right])
    with probe:
        start = time.perf_counter()
        product = client.persist(left @ right)
        wait(product)
        elapsed = time.perf_counter() - start
    del product, left, right
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scheduler", help="scheduler address, e.g. tcp://127.0.0.1:7620")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--variants", nargs="+", required=True, help="CHUNKS[:direct+scatter], run in order")
    parser.add_argument("--workers", type=int, default=4, help="wait for this many workers before starting")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cgroups", default="", help="name=cgroup_dir,... of the nodes, for throttling figures")
    parser.add_argument("--corrupt", action="store_true", help="perturb one entry of C before the check (must fail)")
    args = parser.parse_args()
    cgroups = dict(item.split("=", 1) for item in args.cgroups.split(",") if item)
    variants = [(text, *parse_variant(text, args.n)) for text in args.variants]

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
        # Warm: one untimed product of the full size with the first variant.
        _, a_chunks, b_chunks, flags = variants[0]
        multiply_end_to_end(client, a, b, a_chunks, b_chunks, flags)
        for text, a_chunks, b_chunks, flags in variants:
            with Probe(client, cgroups) as probe:
                start = time.perf_counter()
                product = multiply_end_to_end(client, a, b, a_chunks, b_chunks, flags)
                elapsed = time.perf_counter() - start
            e2e_lines = list(probe.lines(text, "end_to_end")) + list(probe.task_lines(text, "end_to_end"))
            if args.corrupt:
                product[args.n // 2, args.n // 3] += 1e-3
            worst = freivalds_worst_ratio(a, b, product, args.seed)
            verified = worst <= 1.0
            failed = failed or not verified
            del product
            probe = Probe(client, cgroups)
            in_place = multiply_in_place(client, a, b, a_chunks, b_chunks, probe)
            print(f"RESULT n={args.n} variant={text} end_to_end_s={elapsed:.6f} compute_s={in_place:.6f} "
                  f"verified={'yes' if verified else 'no'} worst_ratio={worst:.3g} workers={workers}", flush=True)
            for line in e2e_lines + list(probe.lines(text, "compute")) + list(probe.task_lines(text, "compute")):
                print(line, flush=True)
    if failed:
        print("dask_gemm: C fails Freivalds' test", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
