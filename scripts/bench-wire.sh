#!/usr/bin/env bash
# What encryption costs (the target: encrypted within 10% of plain; figures in
# docs/performance.md, "Encrypted links"): RUNS multiplies of
# size N on CONFIG with plain links and RUNS with `wire: encrypted` (TLS 1.3), interleaved in
# pairs (plain, encrypted, plain, ...) so the shared machine's drift hits both alike, against the
# same workers (started by `tessera up` with --wire any, they serve both) and the same profile.
# Prints median (min..max) makespan, wall time of the command, GFLOP/s and the workers' share of
# CPU spent communicating (which now includes their AES-GCM work); the median (min..max) of the
# per-pair ratio encrypted / plain; and OpenSSL's AES-128-GCM and ChaCha20-Poly1305 rates on one
# core of this machine, the figure to weigh a Pi's link against. Nothing is hard-coded. Usage:
#   scripts/bench-wire.sh [CONFIG]   env: N (4096), RUNS (7), POLICY (proportional)
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG="${1:-configs/local.yaml}"
N="${N:-4096}"
RUNS="${RUNS:-7}"
POLICY="${POLICY:-proportional}"
OUT="build/bench-wire"
source scripts/bench-cluster.sh
start_bench_cluster "$CONFIG" "$OUT"
profile="${CONFIG%.yaml}.profile.yaml"
[ -f "$profile" ] || "$T" profile "$CONFIG" --quick > /dev/null

# The same cluster file with wire: encrypted added, next to the original so a relative
# secret_file resolves the same way; removed on exit with the cluster.
sealed="$(dirname "$CONFIG")/.bench-wire-$$.yaml"
trap "rm -f '$sealed'; \"$T\" down \"$CONFIG\" > /dev/null || true" EXIT
{ echo "wire: encrypted"; grep -v '^wire:' "$CONFIG"; } > "$sealed"
chmod 600 "$sealed"

for run in $(seq 1 "$RUNS"); do
  for wire in plain encrypted; do
    config="$CONFIG"
    [ "$wire" = encrypted ] && config="$sealed"
    start=$(date +%s.%N)
    "$T" multiply "$config" --n "$N" --policy "$POLICY" --profile "$profile" --verify freivalds \
        --report "$OUT/$wire-$run.json" > "$OUT/$wire-$run.txt" 2>&1
    end=$(date +%s.%N)
    echo "$start $end" > "$OUT/$wire-$run.wall"
  done
done

aes=$(openssl speed -elapsed -seconds 2 -evp aes-128-gcm 2>/dev/null | awk '/^AES-128-GCM/ {print $NF}')
chacha=$(openssl speed -elapsed -seconds 2 -evp chacha20-poly1305 2>/dev/null | awk '/^ChaCha20-Poly1305/ {print $NF}')

python3 - "$OUT" "$N" "$RUNS" "$CONFIG" "$POLICY" "$aes" "$chacha" <<'PY'
import json, statistics, sys
out, n, runs, config, policy, aes, chacha = sys.argv[1:]
runs = int(runs)
def load(wire, r):
    report = json.load(open(f"{out}/{wire}-{r}.json"))
    start, end = map(float, open(f"{out}/{wire}-{r}.wall").read().split())
    io = sum(node["worker_io_cpu_s"] for node in report["nodes"])
    cpu = sum(node["worker_compute_cpu_s"] for node in report["nodes"])
    return {"makespan": report["makespan_s"], "wall": end - start, "gflops": report["gflops"],
            "comm": io / (io + cpu) if io + cpu > 0 else float("nan"), "verified": report["verified"]}
data = {w: [load(w, r) for r in range(1, runs + 1)] for w in ("plain", "encrypted")}
def spread(values, fmt="{:.3f}"):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}..{fmt.format(max(values))})"
print(f"config {config}, policy {policy}, n = {n}, {runs} runs per wire mode, interleaved in pairs\n")
print("| wire | makespan s | command wall s | GFLOP/s | worker comm CPU | verified |")
print("|---|---|---|---|---|---|")
for wire, rows in data.items():
    print(f"| {wire} | {spread([r['makespan'] for r in rows])} | {spread([r['wall'] for r in rows])} | "
          f"{spread([r['gflops'] for r in rows], '{:.1f}')} | {spread([100 * r['comm'] for r in rows], '{:.1f}')}% | "
          f"{all(r['verified'] for r in rows)} |")
for key, label in (("makespan", "makespan"), ("wall", "command wall time")):
    ratios = [e[key] / p[key] for p, e in zip(data["plain"], data["encrypted"])]
    print(f"\nencrypted / plain {label}, per pair: {spread(ratios)}")
to_gb = lambda kbytes: float(kbytes.rstrip("k")) * 1000 / 1e9 if kbytes else float("nan")
print(f"\none core of this machine (openssl speed, 16 KiB blocks): AES-128-GCM {to_gb(aes):.2f} GB/s, "
      f"ChaCha20-Poly1305 {to_gb(chacha):.2f} GB/s")
PY
