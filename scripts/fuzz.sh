#!/usr/bin/env bash
# Runs Tessera's libFuzzer harnesses (tests/fuzz/) for a bounded time each, from the committed
# seed corpora. Builds them with clang, ASan and UBSan in build-fuzz/ (only the harnesses and the
# libraries they link: core, transport, gemm, and for the graph payloads graph and partition), so the
# g++ build in build/ is untouched.
#
#   scripts/fuzz.sh [SECONDS] [--merge] [HARNESS...]
#     SECONDS   time per harness (default 60)
#     --merge   afterwards, add the new inputs that reach new code to tests/fuzz/corpus/<harness>/
#               (otherwise new inputs stay in build-fuzz/corpus/<harness>/, a scratch dir)
#     HARNESS   fuzz_codec, fuzz_handshake (default: all)
#
# Prints executions per harness. Exits non-zero if any harness crashed, broke a property, hung
# (-timeout) or allocated too much (-malloc_limit_mb / -rss_limit_mb); the input that did it is
# kept in build-fuzz/crashes/<harness>/ and named in the output. Reproduce with
#   build-fuzz/bin/<harness> build-fuzz/crashes/<harness>/<file>
set -euo pipefail
cd "$(dirname "$0")/.."

all_harnesses=(fuzz_codec fuzz_handshake)
seconds=60
merge=0
harnesses=()
for arg in "$@"; do
  case "$arg" in
    --merge) merge=1 ;;
    ''|*[!0-9]*)
      if [[ " ${all_harnesses[*]} " != *" $arg "* ]]; then
        echo "fuzz.sh: unknown harness '$arg'; valid: ${all_harnesses[*]}" >&2
        exit 2
      fi
      harnesses+=("$arg") ;;
    *) seconds="$arg" ;;
  esac
done
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${all_harnesses[@]}")
if [ "$seconds" -lt 1 ]; then echo "fuzz.sh: SECONDS must be >= 1" >&2; exit 2; fi

if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ not found; install the Debian packages clang and libclang-rt-14-dev (scripts/setup.sh)" >&2
  exit 1
fi

build_start=$(date +%s)
# -O1 -g without NDEBUG: asserts stay on and stacks stay readable, at a fuzzing speed close to -O2.
# shellcheck source=scripts/cmake-generator.sh
source scripts/cmake-generator.sh
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DTESSERA_BUILD_FUZZERS=ON -DTESSERA_BUILD_TESTS=OFF \
  -DTESSERA_BUILD_BENCHMARKS=OFF > build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
jobs=$(nproc); [ "$jobs" -le 2 ] || jobs=2  # a fuzz build shares the machine with the tests
cmake --build build-fuzz -j "$jobs" --target "${harnesses[@]}"
echo "fuzz.sh: build took $(( $(date +%s) - build_start )) s"

# Allocation limits: the handshake reads frames of at most a few KiB and the codec decodes in
# place, so anything near these limits means a peer made us allocate what it merely claimed.
max_len=65536
malloc_limit_mb=64
rss_limit_mb=1024
timeout_s=10  # a single input taking this long counts as a hang

failed=0
summary=()
for harness in "${harnesses[@]}"; do
  seeds="tests/fuzz/corpus/$harness"
  scratch="build-fuzz/corpus/$harness"
  crashes="build-fuzz/crashes/$harness"
  log="build-fuzz/$harness.log"
  mkdir -p "$scratch" "$crashes"
  echo "fuzz.sh: $harness for $seconds s (seeds $seeds, new inputs to $scratch)"
  status=0
  # New inputs go to the first directory only; the committed seeds are read, not written.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    timeout --kill-after=10 $(( seconds + 60 )) \
    "build-fuzz/bin/$harness" "$scratch" "$seeds" -max_total_time="$seconds" -timeout="$timeout_s" \
      -max_len="$max_len" -malloc_limit_mb="$malloc_limit_mb" -rss_limit_mb="$rss_limit_mb" \
      -artifact_prefix="$crashes/" -print_final_stats=1 > "$log" 2>&1 || status=$?
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  per_second=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)
  if [ "$status" -ne 0 ]; then
    failed=1
    echo "fuzz.sh: $harness FAILED (exit $status); last lines of $log:" >&2
    tail -n 40 "$log" >&2
    for input in "$crashes"/*; do
      [ -e "$input" ] && echo "fuzz.sh: kept input $input (reproduce: build-fuzz/bin/$harness $input)" >&2
    done
    summary+=("$(printf '%-16s FAILED  executions %s' "$harness" "${executions:-?}")")
    continue
  fi
  summary+=("$(printf '%-16s ok      executions %s (%s/s), %s, corpus %s seeds + %s new' "$harness" \
    "${executions:-?}" "${per_second:-?}" "${coverage:-cov: ?}" "$(ls "$seeds" | wc -l)" "$(ls "$scratch" | wc -l)")")
  if [ "$merge" -eq 1 ]; then
    # -merge=1 copies into the first directory only the inputs that add coverage to it.
    "build-fuzz/bin/$harness" -merge=1 "$seeds" "$scratch" > "build-fuzz/$harness.merge.log" 2>&1
    echo "fuzz.sh: $harness corpus now $(ls "$seeds" | wc -l) files, $(du -sh "$seeds" | cut -f1)"
  fi
done

echo "fuzz.sh: summary ($seconds s per harness)"
printf '  %s\n' "${summary[@]}"
exit "$failed"
