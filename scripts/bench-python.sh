#!/usr/bin/env bash
# The Python call against `tessera multiply` for the same product (the target: the Python call's
# overhead over the CLI's driver under 2% at n = 4096): n = 4096
# on configs/local.yaml by default, RUNS (>= 5) runs of each, interleaved (CLI, Python, CLI, ...)
# so that the machine's drift hits both alike. Both read the same A and B from .npy files, use
# the default policy (proportional) with Freivalds verification, and run as separate processes
# under /usr/bin/time for wall time and peak RSS.
#
# Prints medians with min..max of: each process's wall time and the run's makespan (from its
# report); the Python call's time and its OVERHEAD, the part of the call spent outside the C++
# steps the CLI performs as well (NaN/inf scan, zero-filling C, session open, Session::multiply,
# close), taken from report.timing; and both processes' peak RSS next to the bytes of A, B and C.
#
#   scripts/bench-python.sh [N] [RUNS] [CONFIG]
# Needs the build (scripts/build.sh: build/bin/tessera and build/python) and /usr/bin/python3 with
# numpy. Starts the cluster with `tessera up` if it is not running (and stops it again at the
# end), and measures a quick profile if there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-4096}"
runs="${2:-5}"
config="${3:-configs/local.yaml}"
python="${PYTHON:-/usr/bin/python3}"
tessera=build/bin/tessera
if [ ! -x "$tessera" ] || ! ls build/python/tessera/_tessera*.so > /dev/null 2>&1; then
  echo "bench-python: build first (scripts/build.sh builds build/bin/tessera and build/python)" >&2
  exit 1
fi
if [ "$runs" -lt 5 ]; then echo "bench-python: use at least 5 runs" >&2; exit 1; fi
export PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"
export TESSERA_WORKER_BIN="${TESSERA_WORKER_BIN:-$PWD/build/bin/tessera-worker}"

work="$(mktemp -d /tmp/tessera-bench-python-XXXXXX)"
started_cluster=0
cleanup() {
  if [ "$started_cluster" = 1 ]; then "$tessera" down "$config" > /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$tessera" up "$config" > "$work/up.log" 2>&1
if grep -q " started " "$work/up.log"; then started_cluster=1; fi
profile="${config%.yaml}.profile.yaml"
if [ ! -f "$profile" ]; then "$tessera" profile "$config" --quick > /dev/null; fi

"$python" - "$n" "$work" <<'PY'
import sys
import numpy as np
n, work = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(1)
np.save(f"{work}/a.npy", rng.random((n, n)))
np.save(f"{work}/b.npy", rng.random((n, n)))
PY

cat > "$work/run.py" <<'PY'
import json, sys
import numpy as np
import tessera
config, work = sys.argv[1], sys.argv[2]
a = np.load(f"{work}/a.npy")
b = np.load(f"{work}/b.npy")
c, report = tessera.Cluster(config).multiply(a, b)
print(json.dumps({"makespan_s": report.makespan_s, "verified": report.verified, **report.timing}))
PY

for i in $(seq 1 "$runs"); do
  # The CLI's stderr (the inline-secret warning of configs/local.yaml) is shown only on failure.
  /usr/bin/time -f "%e %M" -o "$work/cli-$i.time" \
    "$tessera" multiply "$config" --a "$work/a.npy" --b "$work/b.npy" --report "$work/cli-$i.json" \
    > /dev/null 2> "$work/cli-$i.err" || { cat "$work/cli-$i.err" >&2; exit 1; }
  /usr/bin/time -f "%e %M" -o "$work/py-$i.time" "$python" "$work/run.py" "$config" "$work" > "$work/py-$i.json"
done

# What the interpreter with numpy and tessera imported holds before any matrix exists.
/usr/bin/time -f "%e %M" -o "$work/imports.time" "$python" -c "import numpy, tessera"

"$python" - "$n" "$runs" "$config" "$work" <<'PY'
import json, statistics, sys
n, runs, config, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

def time_file(path):
    wall, rss_kb = open(path).read().split()[-2:]
    return float(wall), int(rss_kb) * 1024

cli = [time_file(f"{work}/cli-{i}.time") for i in range(1, runs + 1)]
py = [time_file(f"{work}/py-{i}.time") for i in range(1, runs + 1)]
cli_reports = [json.load(open(f"{work}/cli-{i}.json")) for i in range(1, runs + 1)]
py_reports = [json.load(open(f"{work}/py-{i}.json")) for i in range(1, runs + 1)]
assert all(r["verified"] for r in cli_reports + py_reports), "a run failed verification"
overhead = [r["call_s"] - r["input_check_s"] - r["output_fill_s"] - r["session_open_s"] - r["driver_s"]
            - r["session_close_s"] for r in py_reports]
share = [o / r["call_s"] * 100 for o, r in zip(overhead, py_reports)]

def row(label, values, unit="s", scale=1.0, digits=3):
    values = [v * scale for v in values]
    print(f"  {label:<44} {statistics.median(values):>9.{digits}f} {unit:<3} "
          f"({min(values):.{digits}f}..{max(values):.{digits}f})")

print(f"Python call vs tessera multiply: n = {n}, {config}, {runs} runs each, interleaved; median (min..max)")
row("tessera multiply: process wall", [w for w, _ in cli])
row("python: process wall (interpreter + imports)", [w for w, _ in py])
row("tessera multiply: makespan", [r["makespan_s"] for r in cli_reports])
row("python: makespan", [r["makespan_s"] for r in py_reports])
row("python: multiply() call", [r["call_s"] for r in py_reports])
row("python: Session::multiply inside the call", [r["driver_s"] for r in py_reports])
row("python: call overhead beyond the CLI's steps", overhead, "ms", 1e3, 2)
row("python: overhead share of the call", share, "%", 1.0, 3)
abc = 3 * n * n * 8
mib = lambda b: b / 2**20
cli_rss, py_rss = max(r for _, r in cli), max(r for _, r in py)
imports_rss = time_file(f"{work}/imports.time")[1]
print(f"  peak RSS: tessera multiply {mib(cli_rss):.0f} MiB, python {mib(py_rss):.0f} MiB, difference "
      f"{mib(py_rss - cli_rss):+.0f} MiB; python with numpy and tessera imported, no matrices: {mib(imports_rss):.0f} MiB; "
      f"A + B + C = {mib(abc):.0f} MiB (one matrix {mib(abc / 3):.0f} MiB)")
PY
