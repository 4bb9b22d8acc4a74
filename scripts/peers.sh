#!/usr/bin/env bash
# The peers study (docs/studies.md): Tessera beside ScaLAPACK (pdgemm over OpenMPI) and Dask
# distributed, all under the same emulation. For each cluster file it brings up its own copy of
# the cluster (cluster peers-<name>, ports 7601.., run folder build/peers/run), profiles it, and
# for each n runs RUNS interleaved rounds; a round is, in an order rotated from round to round:
#   Tessera   `tessera multiply` with each policy, --verify freivalds, --report JSON
#             (makespan from the report, the slowest node's multiply time, the command's wall time);
#   ScaLAPACK build/peers/pdgemm_driver (peers/scalapack/pdgemm_driver.c) under mpirun, every
#             variant of SCALAPACK (end to end from rank 0, pdgemm alone, mpirun's wall time);
#   Dask      a scheduler in the root namespace, one single-thread `dask worker` per node,
#             peers/dask/dask_gemm.py with every variant of DASK (warmed by one untimed product of
#             the same size; end to end from the client, and the product alone on inputs already
#             on the workers).
# Every MPI rank and Dask worker runs inside the cgroup of the node it stands for, and inside its
# network namespace when the node has a shaped link (peers/place.sh, from the cluster's
# emulation.json); rank 0 and the first Dask worker stand for the first node of the file. The
# cluster's own tessera-workers stay up in the same cgroups, idle (blocked in accept/read) while a
# peer runs; their CPU time is read around every peer run and recorded. Every product is checked
# (Freivalds); a failed check is recorded as such. Around every run each node cgroup's throttled
# time (cpu.stat) is read, and each node's CPU time comes from the ranks (getrusage), the Dask
# workers (process_time) or Tessera's report: OUT/nodes.csv says where each run's time went.
#
# A ScaLAPACK variant is LAYOUT/NB/MODE:
#   LAYOUT  PxQ: a P x Q BLACS grid, one rank per node (P x Q = nodes), rank 0 on the first node;
#           PxQ@R1,R2,..: R1 ranks in the first node's cgroup, R2 in the second's, .. (sum P x Q),
#           the heterogeneous trick of HeteroMPI and Kalinov-Lastovetsky: the even block-cyclic
#           split then gives a node a share in proportion to its ranks.
#   NB      square block size.
#   MODE    how a rank waits for a message (Open MPI 4.1 polls):
#           spin   --mca mpi_yield_when_idle 0 (busy polling, Open MPI's default when not
#                  oversubscribed);
#           yield  --mca mpi_yield_when_idle 1 (sched_yield between polls; Open MPI's own choice
#                  when oversubscribed, as every run here is: the old harness ran this);
#           sleep  yield with peers/scalapack/idle_sleep.c preloaded: an idle poll sleeps
#                  MPI_IDLE_SLEEP_US, as Intel MPI's I_MPI_WAIT_MODE / MVAPICH's blocking mode do;
#                  sleepN sleeps N microseconds.
#           Every mode uses the TCP transport (--mca btl tcp,self), as between real machines;
#           MODE-sm (e.g. sleep-sm) lets Open MPI use shared memory (vader) between every pair of
#           ranks, which it does for all ranks of one host: a diagnostic of what TCP costs, not
#           a cluster (between real machines there is no shared memory); refused for clusters
#           with shaped links.
#   A fourth field "coordinator" (LAYOUT/NB/MODE/coordinator) adds a rank 0 that only
#   coordinates (generates, scatters and gathers the matrices) outside every cgroup and
#   namespace, where Tessera's coordinator runs; otherwise the first node's first rank does that
#   within the node's quota.
# A Dask variant is CHUNKS[:direct+scatter+finalize] (peers/dask/dask_gemm.py): CHUNKS a square
# chunk size or RxKxC; direct gathers C straight from the workers, scatter sends the inputs' chunks
# straight to the workers instead of through the graph; finalize brings C back the way
# client.compute(A @ B) does (one worker concatenates C and sends it whole; every run before
# 2026-11-27's block gathering did this), otherwise the client gathers C's blocks and assembles C.
# Writes OUT/{runs.csv,nodes.csv,speeds.csv,tasks.csv,setup.md,summary.csv,report.md,peers.png}; logs in
# build/peers/logs. OUT may hold earlier runs' folders (OUT/earlier/<name>/ with their own runs.csv
# and nodes.csv): the report's "configurations tried" table lists them beside this run's.
# Needs root (cgroups, namespaces). Usage:
#   scripts/peers.sh [CONFIG...]   (default configs/local-mixed-lan.yaml configs/local-mixed.yaml)
#   env: N ("2048 4096"), RUNS (5), POLICIES ("model proportional dynamic even"),
#        SCALAPACK ("2x2/64/yield 2x2/64/sleep 1x7@4,1,1,1/64/sleep 7x1@4,1,1,1/64/sleep"),
#        DASK ("1024 1024:direct 2048:direct"), MPI_IDLE_SLEEP_US (1000),
#        OUT (experiments/results/peers)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then CONFIGS=("$@"); else CONFIGS=(configs/local-mixed-lan.yaml configs/local-mixed.yaml); fi
N="${N:-2048 4096}"
RUNS="${RUNS:-5}"
POLICIES="${POLICIES:-model proportional dynamic even}"
SCALAPACK="${SCALAPACK:-2x2/64/yield 2x2/64/sleep 1x7@4,1,1,1/64/sleep 7x1@4,1,1,1/64/sleep}"
DASK="${DASK:-1024 1024:direct 2048:direct}"
MPI_IDLE_SLEEP_US="${MPI_IDLE_SLEEP_US:-1000}"
OUT="${OUT:-experiments/results/peers}"
WORK=build/peers
T=build/bin/tessera
DRIVER=$WORK/pdgemm_driver
IDLE_SLEEP=$WORK/libidle_sleep.so
PYTHON=/usr/bin/python3  # Debian's python3, where python3-distributed lives
# Ports of this study (7600-7699): nodes 7601.., Dask scheduler 7620, Dask workers 7621... MPI's TCP
# transport, PMIx and mpirun take ports the kernel picks from its ephemeral range, which no fixed
# service uses: a fixed range ran dry (a rank's listening port stays in TIME_WAIT for a minute
# after its run, and Open MPI binds without SO_REUSEADDR).
FIRST_NODE_PORT=7601
DASK_SCHEDULER_PORT=7620
DASK_FIRST_WORKER_PORT=7621
PEER_THREADS=(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1)  # one thread per node, as Tessera's workers

scripts/setup-peers.sh
if [ ! -x "$T" ] || [ ! -x build/bin/tessera-worker ]; then
  nice -n 19 cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  nice -n 19 cmake --build build -j2 --target tessera tessera-worker > /dev/null
fi
mkdir -p "$WORK/configs" "$WORK/logs" "$OUT"
if [ ! -x "$DRIVER" ] || [ peers/scalapack/pdgemm_driver.c -nt "$DRIVER" ]; then
  # shellcheck disable=SC2046  # pkg-config's flags are meant to split
  nice -n 19 mpicc -O2 -std=c11 -Wall -Wextra -Wshadow -o "$DRIVER" peers/scalapack/pdgemm_driver.c \
    $(pkg-config --libs scalapack-openmpi) -lm
fi
if [ ! -f "$IDLE_SLEEP" ] || [ peers/scalapack/idle_sleep.c -nt "$IDLE_SLEEP" ]; then
  nice -n 19 cc -O2 -Wall -Wextra -shared -fPIC -o "$IDLE_SLEEP" peers/scalapack/idle_sleep.c
fi
export TESSERA_RUN_DIR="$PWD/$WORK/run"
mkdir -p "$TESSERA_RUN_DIR"
chmod 700 "$TESSERA_RUN_DIR"

# What is running now, so that an interruption stops exactly that and nothing else.
UP_CONFIG=""
CHILD=""
DASK_PIDS=()
stop_dask() {
  local pid waited
  for pid in "${DASK_PIDS[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
  for pid in "${DASK_PIDS[@]}"; do
    waited=0
    while kill -0 "$pid" 2> /dev/null && [ $waited -lt 100 ]; do sleep 0.1; waited=$((waited + 1)); done
    kill -KILL "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
  done
  DASK_PIDS=()
}
cleanup() {
  if [ -n "$CHILD" ]; then kill -TERM "$CHILD" 2> /dev/null || true; wait "$CHILD" 2> /dev/null || true; fi
  stop_dask
  # `down` also removes the cgroups, killing whatever of ours is still inside them.
  if [ -n "$UP_CONFIG" ]; then "$T" down "$UP_CONFIG" > /dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_child LOG CMD...: runs CMD in the background (so that a signal reaches the trap at once) and
# waits; sets RC and WALL (seconds).
run_child() {
  local log="$1" start
  shift
  start=$EPOCHREALTIME
  "$@" > "$log" 2>&1 &
  CHILD=$!
  RC=0
  wait "$CHILD" || RC=$?
  CHILD=""
  WALL=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.6f", b - a }')
}
# CPU seconds (user + system) the cluster's own tessera-workers have used so far; read around every
# peer run to show that they stay idle while MPI ranks and Dask workers share their cgroups.
CLOCK_TICKS=$(getconf CLK_TCK)
workers_cpu_s() {
  local pid_file ticks=0 stat
  for pid_file in "$TESSERA_RUN_DIR/$CLUSTER"/*.pid; do
    stat=$(cat "/proc/$(cat "$pid_file")/stat" 2> /dev/null) || continue
    stat=${stat##*) }  # fields after the command name; utime and stime are fields 14 and 15 of the line
    read -r -a stat <<< "$stat"
    ticks=$((ticks + stat[11] + stat[12]))
  done
  awk -v t="$ticks" -v hz="$CLOCK_TICKS" 'BEGIN { printf "%.2f", t / hz }'
}
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
field() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<< "$2"; }  # field NAME "RESULT a=1 b=2"
# record ROW: appends ROW and the host's 1-minute load average (other users' work shows there).
record() { echo "$1,$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/runs.csv"; }
# record_node ROW: one node's share of one run (config,n,round,system,variant,phase,node,...).
record_node() { echo "$1" >> "$OUT/nodes.csv"; }
# Each node cgroup's throttled seconds and count so far, one "seconds count" pair per node in
# cluster order (cpu.stat: throttled_time in ns on cgroup v1, throttled_usec on v2).
throttle_snapshot() {
  local cg
  for cg in "${NODE_CG[@]}"; do
    awk '$1 == "throttled_time" { s = $2 / 1e9 } $1 == "throttled_usec" { s = $2 / 1e6 } $1 == "nr_throttled" { c = $2 }
      END { printf "%.6f %d ", s, c }' "$cg/cpu.stat"
  done
}
# throttle_delta "BEFORE" "AFTER" I: node I's throttled seconds and count between two snapshots.
throttle_delta() {
  local before after
  read -r -a before <<< "$1"
  read -r -a after <<< "$2"
  awk -v a="${before[$((2 * $3))]}" -v b="${after[$((2 * $3))]}" -v c="${before[$((2 * $3 + 1))]}" \
    -v d="${after[$((2 * $3 + 1))]}" 'BEGIN { printf "%.3f,%d", b - a, d - c }'
}

echo "config,n,round,system,variant,end_to_end_s,compute_s,command_wall_s,verified,idle_tessera_workers_cpu_s,load_1min" > "$OUT/runs.csv"
# phase: end_to_end (the whole timed run) or compute (pdgemm alone / Dask's product in place);
# units: ranks or workers in the node; gflop: its share of the 2 n^3 flops (when known); cpu_s: CPU
# time its processes used in the phase; busy_s: how long the phase kept it (ScaLAPACK: pdgemm until
# its part returned; Tessera: its multiply time); throttled_s, nr_throttled: its cgroup's throttling
# during the whole command (ScaLAPACK: the whole mpirun, input generation and check included).
echo "config,n,round,system,variant,phase,node,units,gflop,cpu_s,busy_s,throttled_s,nr_throttled" > "$OUT/nodes.csv"
echo "config,node,gflops" > "$OUT/speeds.csv"
# Dask's task placement per timed product (dask_gemm.py's TASKS lines: the task stream and the
# scheduler's confirmed steals), one row per worker.
echo "config,n,round,variant,phase,node,tasks,compute_s,transfer_s,first_s,last_s,stolen_to,stolen_from" > "$OUT/tasks.csv"
SETUP="$WORK/setup.md"
{
  echo "- machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), Linux $(uname -r)," \
       "$(free -g | awk '/^Mem:/ { print $2 }') GiB; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- tessera $(git rev-parse --short HEAD) ($(git status --porcelain --untracked-files=no | grep -q . &&
    echo 'with changes to tracked files' || echo 'no changes to tracked files'));" \
       "$(mpirun --version | head -1); ScaLAPACK $(dpkg-query -W -f='${Version}' libscalapack-openmpi-dev);" \
       "Dask $($PYTHON -c 'import dask, distributed; print(dask.__version__ + ", distributed " + distributed.__version__)');" \
       "NumPy $($PYTHON -c 'import numpy; print(numpy.__version__)'); OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-pthread:amd64 2> /dev/null || echo '?')"
  echo "- command: \`N=\"$N\" RUNS=$RUNS POLICIES=\"$POLICIES\" SCALAPACK=\"$SCALAPACK\" DASK=\"$DASK\"" \
       "MPI_IDLE_SLEEP_US=$MPI_IDLE_SLEEP_US scripts/peers.sh ${CONFIGS[*]}\`"
} > "$SETUP"

bring_up() {  # bring_up SOURCE_CONFIG: sets CONFIG, CLUSTER and the NODE_* arrays
  local source="$1" base
  base=$(basename "$source")
  CONFIG="$WORK/configs/$base"
  LABEL="${base%.yaml}"
  CLUSTER=$($PYTHON peers/cluster_tool.py copy-config "$source" "$CONFIG" "$FIRST_NODE_PORT")
  chmod 600 "$CONFIG"
  UP_CONFIG="$CONFIG"
  "$T" up "$CONFIG" | tee "$WORK/logs/$CLUSTER-up.txt"
  "$T" profile "$CONFIG" --refresh | tee "$WORK/logs/$CLUSTER-profile.txt"
  NODE_NAME=() NODE_CG=() NODE_NS=() NODE_HOST=() NODE_ADDR=()
  local name cg ns host addr
  while read -r name cg ns host addr; do
    NODE_NAME+=("$name") NODE_CG+=("$cg") NODE_NS+=("$ns") NODE_HOST+=("$host") NODE_ADDR+=("$addr")
    if [ "$cg" = "-" ]; then echo "peers: node $name of $source is not CPU-emulated; every node must be" >&2; exit 1; fi
  done < <($PYTHON peers/cluster_tool.py nodes "$TESSERA_RUN_DIR/$CLUSTER/emulation.json")
  # Namespaced nodes reach the root namespace at the host end of their own veth; every host end
  # is an address of this machine, so the first one serves as the root's address for all.
  SUBNET=127.0.0.0/8
  ROOT_ADDRESS=127.0.0.1
  local i
  for i in "${!NODE_NAME[@]}"; do
    if [ "${NODE_NS[$i]}" != "-" ]; then SUBNET=198.18.0.0/15; ROOT_ADDRESS=${NODE_HOST[$i]}; break; fi
  done
  {
    echo "- $source as cluster \`$CLUSTER\` (MPI and Dask traffic on $SUBNET):"
    for i in "${!NODE_NAME[@]}"; do
      echo "  - ${NODE_NAME[$i]}: cgroup ${NODE_CG[$i]} (quota $(cat "${NODE_CG[$i]}/cpu.cfs_quota_us" 2> /dev/null ||
        cat "${NODE_CG[$i]}/cpu.max") per $(cat "${NODE_CG[$i]}/cpu.cfs_period_us" 2> /dev/null || echo 'cpu.max') us)," \
        "$([ "${NODE_NS[$i]}" = "-" ] && echo 'root namespace' || echo "namespace ${NODE_NS[$i]} at ${NODE_ADDR[$i]}")"
    done
    echo "  - profiled speeds: $(awk '/^node +GFLOP/ { on = 1; next } /^(graph rates|coordinator)/ { on = 0 }
      on && NF { printf "%s%s %s GFLOP/s", (count++ ? ", " : ""), $1, $2 }' "$WORK/logs/$CLUSTER-profile.txt")"
  } >> "$SETUP"
  awk -v config="$LABEL" '/^node +GFLOP/ { on = 1; next } /^(graph rates|coordinator)/ { on = 0 }
    on && NF { printf "%s,%s,%s\n", config, $1, $2 }' "$WORK/logs/$CLUSTER-profile.txt" >> "$OUT/speeds.csv"
}

bring_down() {
  "$T" down "$CONFIG" > /dev/null
  UP_CONFIG=""
}

run_tessera() {  # run_tessera N ROUND
  local n="$1" round="$2" policy report makespan slowest verified before after i line
  for policy in $POLICIES; do
    report="$WORK/logs/$CLUSTER-tessera-$policy-$n-$round.json"
    before=$(throttle_snapshot)
    run_child "$WORK/logs/$CLUSTER-tessera-$policy-$n-$round.txt" \
      "$T" multiply "$CONFIG" --n "$n" --policy "$policy" --verify freivalds --report "$report"
    after=$(throttle_snapshot)
    if [ "$RC" -eq 0 ]; then
      # slowest: the longest any node spent multiplying (its kernel time, no communication).
      read -r makespan slowest verified < <($PYTHON peers/cluster_tool.py report-summary "$report")
      i=0
      while read -r line; do
        record_node "$LABEL,$n,$round,tessera,$policy,end_to_end,$line,$(throttle_delta "$before" "$after" $i)"
        i=$((i + 1))
      done < <($PYTHON peers/cluster_tool.py report-nodes "$report")
    else
      makespan="" slowest="" verified="failed(exit $RC)"
    fi
    record "$LABEL,$n,$round,tessera,$policy,$makespan,$slowest,$WALL,$verified,"
    echo "  tessera $policy: makespan ${makespan:-?} s (slowest node multiplying ${slowest:-?} s), command $WALL s," \
      "verified $verified"
  done
}

# mpirun options of a MODE (see the header), one per line.
mpi_mode_options() {
  local wait="${1%-sm}" btl="tcp,self"
  [ "$wait" = "$1" ] || btl="vader,tcp,self"
  case "$wait" in
    spin) echo "--mca mpi_yield_when_idle 0" ;;
    yield | sleep | sleep[0-9]*) echo "--mca mpi_yield_when_idle 1" ;;
    *) echo "peers: unknown MPI mode '$1' (valid: spin yield sleep sleepMICROSECONDS, each optionally -sm)" >&2
       return 1 ;;
  esac
  echo "--mca btl $btl"
}
# The environment every rank of a MODE gets, VAR=value words. Given to each rank through `env` in
# its own command line: mpirun's -x reaches only the first app context of an MPMD command line (the
# harness before 2026-11-27 set OPENBLAS_NUM_THREADS=1 that way, so only rank 0 had it).
mpi_mode_env() {
  local wait="${1%-sm}"
  echo "${PEER_THREADS[*]}"
  case "$wait" in
    sleep) echo "LD_PRELOAD=$PWD/$IDLE_SLEEP PEERS_IDLE_SLEEP_US=$MPI_IDLE_SLEEP_US" ;;
    sleep[0-9]*) echo "LD_PRELOAD=$PWD/$IDLE_SLEEP PEERS_IDLE_SLEEP_US=${wait#sleep}" ;;
  esac
}

run_scalapack() {  # run_scalapack N ROUND
  local n="$1" round="$2" spec layout grid nb mode p q i r app result workers_before idle_cpu variant log
  local -a per_node mode_options rank_env words
  local line
  local before after
  for spec in $SCALAPACK; do
    IFS=/ read -r layout nb mode apart <<< "$spec"
    grid=${layout%@*} p=${grid%x*} q=${grid#*x}
    if [ "$layout" = "$grid" ]; then
      per_node=()
      for i in "${!NODE_NAME[@]}"; do per_node+=(1); done
      variant="$grid-nb$nb-$mode"
    else
      IFS=, read -r -a per_node <<< "${layout#*@}"
      variant="$grid@$(IFS=; echo "${per_node[*]}")-nb$nb-$mode"
    fi
    local total=0
    for r in "${per_node[@]}"; do total=$((total + r)); done
    if [ ${#per_node[@]} -ne ${#NODE_NAME[@]} ] || [ "$total" -ne $((p * q)) ]; then
      echo "peers: $spec needs ranks for each of ${#NODE_NAME[@]} nodes adding up to $((p * q)); skipped" >&2
      continue
    fi
    if [ "$mode" != "${mode%-sm}" ] && [ "$SUBNET" != "127.0.0.0/8" ]; then
      echo "peers: $spec: shared memory would bypass $CLUSTER's shaped links; skipped" >&2
      continue
    fi
    mode_options=() rank_env=()
    while read -r line; do read -r -a words <<< "$line"; mode_options+=("${words[@]}"); done < <(mpi_mode_options "$mode")
    [ ${#mode_options[@]} -gt 0 ] || continue
    read -r -a rank_env <<< "$(mpi_mode_env "$mode" | tr '\n' ' ')"
    app=()
    local first=0
    case "$apart" in
      "") ;;
      coordinator)  # rank 0 only coordinates, outside every cgroup and namespace, like Tessera's
        # Two ranks in the root namespace of a cluster with namespaced nodes reach each other from
        # a veth address the other does not expect, and Open MPI's TCP transport drops the
        # connection and hangs (measured 2026-11-27): only loopback clusters get a coordinator.
        if [ "$SUBNET" != "127.0.0.0/8" ]; then
          echo "peers: $spec: a coordinator apart needs a cluster without shaped links; skipped" >&2
          continue
        fi
        app+=(-np 1 env "${rank_env[@]}" "$DRIVER" "$n" "$p" "$q" "$nb" :)
        variant+="-coord" first=1 ;;
      *) echo "peers: $spec: the fourth field can only be 'coordinator'; skipped" >&2; continue ;;
    esac
    for i in "${!NODE_NAME[@]}"; do
      [ "${per_node[$i]}" -eq 0 ] && continue
      [ ${#app[@]} -gt 0 ] && [ "${app[-1]}" != ":" ] && app+=(:)
      app+=(-np "${per_node[$i]}" peers/place.sh "${NODE_CG[$i]}" "${NODE_NS[$i]}" env "${rank_env[@]}" \
        "$DRIVER" "$n" "$p" "$q" "$nb")
    done
    log="$WORK/logs/$CLUSTER-scalapack-$variant-$n-$round.txt"
    workers_before=$(workers_cpu_s)
    before=$(throttle_snapshot)
    # PMIx (how ranks reach mpirun) must listen beyond loopback for ranks in other namespaces.
    # --oversubscribe: more ranks than the machine's 2 cores, as the emulation intends; Open MPI
    # then turns mpi_yield_when_idle on unless the mode says otherwise.
    run_child "$log" \
      env PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="$SUBNET" \
      timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none \
      --mca btl_tcp_if_include "$SUBNET" "${mode_options[@]}" "${app[@]}"
    after=$(throttle_snapshot)
    idle_cpu=$(seconds_between "$workers_before" "$(workers_cpu_s)")
    result=$(grep '^RESULT' "$log" || true)
    local e2e pd verified
    e2e=$(field end_to_end_s "$result") pd=$(field pdgemm_s "$result") verified=$(field verified "$result")
    if [ "$RC" -ne 0 ]; then verified="failed(exit $RC)"; e2e="" pd=""; fi
    record "$LABEL,$n,$round,scalapack,$variant,$e2e,$pd,$WALL,$verified,$idle_cpu"
    if [ "$RC" -eq 0 ] && [ "$first" -eq 1 ]; then
      read -r t c <<< "$(awk '/^RANK rank=0 / { for (k = 1; k <= NF; ++k) { split($k, kv, "=");
        if (kv[1] == "cpu_total_s") t = kv[2]; if (kv[1] == "cpu_pdgemm_s") c = kv[2] } } END { print t, c }' "$log")"
      record_node "$LABEL,$n,$round,scalapack,$variant,end_to_end,coordinator,1,0,$t,,,"
      record_node "$LABEL,$n,$round,scalapack,$variant,compute,coordinator,1,0,$c,,,"
    fi
    if [ "$RC" -eq 0 ]; then
      # Ranks are numbered in node order (mpirun's app contexts), per_node[i] of them for node i,
      # after the coordinator when it stands apart.
      local summary_line
      for i in "${!NODE_NAME[@]}"; do
        summary_line=$(awk -v lo="$first" -v hi=$((first + per_node[i])) '
          function v(name,   k) { for (k = 1; k <= NF; ++k) if (index($k, name "=") == 1) return substr($k, length(name) + 2); return 0 }
          /^RANK/ { r = v("rank"); if (r >= lo && r < hi) { g += v("gflop"); t += v("cpu_total_s"); c += v("cpu_pdgemm_s");
            o = v("own_pdgemm_s"); if (o > busy) busy = o } }
          END { printf "%.3f %.3f %.3f %.3f", g, t, c, busy }' "$log")
        read -r g t c busy <<< "$summary_line"
        record_node "$LABEL,$n,$round,scalapack,$variant,end_to_end,${NODE_NAME[$i]},${per_node[$i]},$g,$t,,$(throttle_delta "$before" "$after" "$i")"
        record_node "$LABEL,$n,$round,scalapack,$variant,compute,${NODE_NAME[$i]},${per_node[$i]},$g,$c,$busy,,"
        first=$((first + per_node[i]))
      done
    fi
    echo "  scalapack $variant: end to end ${e2e:-?} s, pdgemm ${pd:-?} s, mpirun $WALL s, verified $verified;" \
      "tessera-workers used $idle_cpu CPU s meanwhile"
  done
}

start_dask() {
  local i port listen contact scheduler
  local scheduler_host=127.0.0.1
  [ "$SUBNET" = "127.0.0.0/8" ] || scheduler_host=0.0.0.0  # namespaced workers reach it at their veth's host end
  /usr/bin/dask scheduler --host "$scheduler_host" --port "$DASK_SCHEDULER_PORT" --no-dashboard \
    > "$WORK/logs/$CLUSTER-dask-scheduler.txt" 2>&1 &
  DASK_PIDS+=($!)
  for i in "${!NODE_NAME[@]}"; do
    port=$((DASK_FIRST_WORKER_PORT + i))
    if [ "${NODE_NS[$i]}" = "-" ]; then
      listen="tcp://$scheduler_host:$port" contact="tcp://$ROOT_ADDRESS:$port" scheduler="tcp://127.0.0.1:$DASK_SCHEDULER_PORT"
    else
      listen="tcp://${NODE_ADDR[$i]}:$port" contact="$listen" scheduler="tcp://${NODE_HOST[$i]}:$DASK_SCHEDULER_PORT"
    fi
    peers/place.sh "${NODE_CG[$i]}" "${NODE_NS[$i]}" env "${PEER_THREADS[@]}" \
      /usr/bin/dask worker "$scheduler" --name "${NODE_NAME[$i]}" --nthreads 1 --no-nanny \
      --no-dashboard --memory-limit 0 --listen-address "$listen" --contact-address "$contact" \
      > "$WORK/logs/$CLUSTER-dask-worker-${NODE_NAME[$i]}.txt" 2>&1 &
    DASK_PIDS+=($!)
  done
}

run_dask() {  # run_dask N ROUND: fresh scheduler and workers for the round, warmed, every variant
  local n="$1" round="$2" variants line log workers_before idle_cpu cgroups="" i
  # Rotate the variants' order from round to round, so that no variant is always first.
  read -r -a variants <<< "$DASK"
  local shift_by=$(((round - 1) % ${#variants[@]}))
  variants=("${variants[@]:$shift_by}" "${variants[@]:0:$shift_by}")
  for i in "${!NODE_NAME[@]}"; do cgroups+="${cgroups:+,}${NODE_NAME[$i]}=${NODE_CG[$i]}"; done
  log="$WORK/logs/$CLUSTER-dask-$n-$round.txt"
  workers_before=$(workers_cpu_s)
  start_dask
  run_child "$log" timeout 1800 $PYTHON peers/dask/dask_gemm.py "tcp://127.0.0.1:$DASK_SCHEDULER_PORT" --n "$n" \
    --variants "${variants[@]}" --workers "${#NODE_NAME[@]}" --cgroups "$cgroups"
  stop_dask
  idle_cpu=$(seconds_between "$workers_before" "$(workers_cpu_s)")
  echo "  dask: tessera-workers used $idle_cpu CPU s during the whole Dask round (start, warm-up, every variant, stop)"
  local variant e2e compute verified seen=0
  while read -r line; do
    variant=$(field variant "$line") e2e=$(field end_to_end_s "$line") compute=$(field compute_s "$line")
    verified=$(field verified "$line")
    record "$LABEL,$n,$round,dask,$variant,$e2e,$compute,,$verified,$idle_cpu"
    echo "  dask $variant: end to end $e2e s, in place $compute s, verified $verified"
    seen=$((seen + 1))
  done < <(grep '^RESULT' "$log" || true)
  while read -r line; do
    record_node "$LABEL,$n,$round,dask,$(field variant "$line"),$(field phase "$line"),$(field name "$line"),1,,$(field cpu_s "$line"),,$(field throttled_s "$line"),$(field nr_throttled "$line")"
  done < <(grep '^WORKER' "$log" || true)
  while read -r line; do
    echo "$LABEL,$n,$round,$(field variant "$line"),$(field phase "$line"),$(field name "$line"),$(field tasks "$line"),$(field compute_s "$line"),$(field transfer_s "$line"),$(field first_s "$line"),$(field last_s "$line"),$(field stolen_to "$line"),$(field stolen_from "$line")" >> "$OUT/tasks.csv"
  done < <(grep '^TASKS' "$log" || true)
  if [ "$RC" -ne 0 ] && [ "$seen" -lt "${#variants[@]}" ]; then
    record "$LABEL,$n,$round,dask,incomplete,,,,failed(exit $RC),$idle_cpu"
    echo "  dask: exit $RC after $seen of ${#variants[@]} variants (see $log)" >&2
  fi
}

for source in "${CONFIGS[@]}"; do
  bring_up "$source"
  for n in $N; do
    for round in $(seq 1 "$RUNS"); do
      systems=(tessera scalapack dask)
      shift_by=$(((round - 1) % 3))
      systems=("${systems[@]:$shift_by}" "${systems[@]:0:$shift_by}")
      echo "$CLUSTER n=$n round $round/$RUNS: ${systems[*]}"
      for system in "${systems[@]}"; do "run_$system" "$n" "$round"; done
    done
  done
  bring_down
done
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$SETUP"

cp "$SETUP" "$OUT/setup.md"  # kept with the run, so that its report can be rewritten later
$PYTHON peers/summarize.py "$OUT" "$OUT/setup.md"
