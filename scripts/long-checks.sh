#!/usr/bin/env bash
# The long checks that keep rapidqa hardened (docs/hardening.md, "Sanitizers
# and fuzzing"): sanitizer builds of the whole test suite, and the fuzzers.
#
#   scripts/long-checks.sh asan           # build-asan: clang, ASan+UBSan, fuzz targets; the whole ctest
#   scripts/long-checks.sh tsan           # build-tsan: clang, TSan; ctest -L nomodel
#   scripts/long-checks.sh fuzz [SECONDS] # every fuzz target for SECONDS (600), two at a time
#   scripts/long-checks.sh all [SECONDS]  # the three in turn; fails if any failed
#
# Environment: JOBS (build and ctest parallelism; default: every core),
# NICE (niceness of builds and runs; default 19: these share the machine),
# BUILD_LOCK (file that serialises builds with anyone else's; default
# /tmp/rapidqa-build.lock; empty: no lock), ASAN_DIR / TSAN_DIR (build
# trees; default build-asan, build-tsan), NO_BUILD=1 (use the trees as
# they are: no configure, no build). The packages of scripts/setup.sh
# must be there; this adds clang, its sanitizer runtimes and libomp.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

case "${1:-}" in
  -h|--help|help) usage; exit 0 ;;
  asan|tsan|fuzz|all) mode=$1; shift ;;
  *) usage >&2; exit 2 ;;
esac
fuzz_seconds=${1:-600}
if ! [[ "$fuzz_seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "SECONDS must be a positive integer, not '$fuzz_seconds'" >&2
  exit 2
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
nice_level=${NICE:-19}
lock=${BUILD_LOCK-/tmp/rapidqa-build.lock}
asan_dir=${ASAN_DIR:-$root/build-asan}
tsan_dir=${TSAN_DIR:-$root/build-tsan}

say() { printf '==> [%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# One line per step in a summary file, shared with the child runs of "all";
# the outermost run prints it at exit. A step stopped by an error (configure
# or build) is recorded as failed by the exit trap.
if [ -z "${RAPIDQA_LONG_CHECKS_SUMMARY:-}" ]; then
  export RAPIDQA_LONG_CHECKS_SUMMARY
  RAPIDQA_LONG_CHECKS_SUMMARY=$(mktemp)
  print_summary=1
else
  print_summary=0
fi
current=
record() {  # record STEP RESULT DETAIL
  printf '%-6s %-7s %s\n' "$1" "$2" "$3" >>"$RAPIDQA_LONG_CHECKS_SUMMARY"
}
on_exit() {
  local rc=$?
  if [ $rc -ne 0 ] && [ -n "$current" ] && ! grep -q "^$current " "$RAPIDQA_LONG_CHECKS_SUMMARY"; then
    record "$current" FAILED "stopped early (exit $rc): see the output above"
  fi
  if ((print_summary)); then
    echo
    echo "==> summary"
    sed 's/^/  /' "$RAPIDQA_LONG_CHECKS_SUMMARY"
    grep -qv '^[a-z]* *ok ' "$RAPIDQA_LONG_CHECKS_SUMMARY" && rc=1
    rm -f "$RAPIDQA_LONG_CHECKS_SUMMARY"
  fi
  exit $rc
}
trap on_exit EXIT
locked() {  # a build command, niced, under the shared build lock
  if [ "${NO_BUILD:-0}" = 1 ]; then
    say "NO_BUILD=1: skipped: $*"
    return 0
  fi
  if [ -n "$lock" ] && command -v flock >/dev/null; then
    flock "$lock" nice -n "$nice_level" "$@"
  else
    nice -n "$nice_level" "$@"
  fi
}

# ---- packages: clang with libFuzzer and the sanitizer runtimes, libomp
# (clang's -fopenmp), llvm-symbolizer (file:line in reports) ----
install_toolchain() {
  local packages=(clang libclang-rt-dev libomp-dev llvm) missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    local sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -q
    "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

# Kernels with more than 28 bits of mmap randomness (vm.mmap_rnd_bits=32,
# common since 6.x) break the shadow-memory layout of clang 14's TSan
# ("unexpected memory mapping"); running without address randomisation
# avoids it.
no_aslr=()
if [ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)" -gt 28 ] && command -v setarch >/dev/null; then
  no_aslr=(setarch "$(uname -m)" -R)
fi

configure() {  # configure DIR CMAKE_ARGS...
  local dir=$1
  shift
  if [ "${NO_BUILD:-0}" = 1 ]; then return 0; fi
  say "configuring $dir ($*)"
  CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug "$@"
  # The tokenizer parity tests run Hugging Face's tokenizers from DIR/npm
  # (tests/CMakeLists.txt): the one scripts/setup.sh installed for ./build.
  if [ ! -e "$dir/npm" ]; then
    if [ -d "$root/build/npm/node_modules/tokenizers" ]; then
      ln -s "$root/build/npm" "$dir/npm"
    else
      say "no $root/build/npm: run scripts/setup.sh first, or the tokenizer parity tests fail"
    fi
  fi
}

# The installed_package_consumer test builds a consumer project against
# the sanitized library: it must compile and link with the same runtime.
# -fsanitize-link-c++-runtime: the C consumer links our C++ library, whose
# UBSan checks need the C++ runtime that a C link leaves out.
consumer_env() {  # consumer_env FLAGS
  export CC=clang CXX=clang++ CFLAGS="$1" CXXFLAGS="$1" LDFLAGS="$1 -fsanitize-link-c++-runtime -lstdc++"
}

run_asan() {
  local start=$SECONDS rc=0
  current=asan
  install_toolchain
  # Benchmarks are not tests: not built here (nor in build-tsan).
  configure "$asan_dir" -DRAPIDQA_FUZZ=ON -DRAPIDQA_BUILD_BENCHMARKS=OFF
  say "building $asan_dir with $jobs jobs (nice $nice_level)"
  locked cmake --build "$asan_dir" -j "$jobs"
  say "ctest in $asan_dir (ASan+UBSan; every test, the fuzz_regressions included)"
  (
    # shellcheck source=sanitizers/options.sh
    source "$root/scripts/sanitizers/options.sh" address
    consumer_env "-fsanitize=address,undefined"
    cd "$asan_dir"
    nice -n "$nice_level" ctest --output-on-failure --no-tests=error -j "$jobs" --timeout 1500
  ) || rc=$?
  record asan "$([ $rc -eq 0 ] && echo ok || echo FAILED)" "ctest rc=$rc in $asan_dir, $((SECONDS - start)) s"
  return $rc
}

# TSan runs the tests labelled nomodel: the Catch2 suite (engine, caches,
# batcher, tuner, Redis relay, rebuild pool) and the command-line tests
# with the hashing encoder. The tests that run model forwards, training,
# quantization and pruning spend their time in LibTorch, OpenMP, oneDNN
# and OpenBLAS, which are not instrumented: TSan would only report the
# synchronisation it cannot see there (scripts/sanitizers/tsan.supp), and
# they are slow under it.
run_tsan() {
  local start=$SECONDS rc=0
  current=tsan
  install_toolchain
  configure "$tsan_dir" -DRAPIDQA_SANITIZE=thread -DRAPIDQA_BUILD_BENCHMARKS=OFF
  # Everything is built, so that any test executable whose tests carry the
  # nomodel label is there (the library is most of the build anyway). The
  # build runs the test binaries to list their tests: without ASLR too.
  say "building $tsan_dir with $jobs jobs (nice $nice_level)"
  locked "${no_aslr[@]}" cmake --build "$tsan_dir" -j "$jobs"
  say "ctest -L nomodel in $tsan_dir (TSan)${no_aslr:+ without ASLR}"
  (
    # shellcheck source=sanitizers/options.sh
    source "$root/scripts/sanitizers/options.sh" thread
    cd "$tsan_dir"
    nice -n "$nice_level" "${no_aslr[@]}" ctest --output-on-failure --no-tests=error -j "$jobs" -L nomodel --timeout 1500
  ) || rc=$?
  record tsan "$([ $rc -eq 0 ] && echo ok || echo FAILED)" "ctest -L nomodel rc=$rc in $tsan_dir, $((SECONDS - start)) s"
  return $rc
}

# Longest input per target, in bytes: a little above the largest seed, so
# the fuzzer mutates whole files without spending its time on megabytes.
max_len_of() {
  case "$1" in
    safetensors) echo 16384 ;;
    torchscript) echo 32768 ;;
    knowledge_jsonl|wordpiece|cache_snapshot|tokenizer_files) echo 8192 ;;
    index_snapshot) echo 12288 ;;  # the graph seed's level generator state alone is ~7 KB
    model_config|change_message) echo 4096 ;;
    capi_ask) echo 2048 ;;
    *) echo 4096 ;;
  esac
}

fuzz_one() {  # fuzz_one TARGET SECONDS; writes $work/TARGET.result
  local target=$1 seconds=$2
  local bin=$asan_dir/fuzz/fuzz_$target log=$work/logs/$target.log corpus=$work/corpus/$target
  local findings=$work/findings/$target
  local dict=$root/fuzz/dictionaries/$target.dict dict_arg=()
  mkdir -p "$corpus" "$findings"
  if [ -f "$dict" ]; then dict_arg=(-dict="$dict"); fi
  local rc=0
  # -timeout: one input running 30 s is a finding (a hang); -rss_limit_mb
  # and the malloc limit it implies: an input that makes the process grow
  # past 3 GiB, or ask for that much at once, is a finding. New inputs go
  # to the working corpus in the build tree, never into fuzz/corpus.
  (
    rapidqa_fuzz_target_options "$target"
    exec nice -n "$nice_level" "$bin" -max_total_time="$seconds" -max_len="$(max_len_of "$target")" -timeout=30 \
      -rss_limit_mb=3072 -report_slow_units=30 -print_final_stats=1 -artifact_prefix="$findings/" \
      "${dict_arg[@]}" "$corpus" "$root/fuzz/corpus/$target"
  ) >"$log" 2>&1 || rc=$?
  local execs result=ok
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ -n "$(ls -A "$findings")" ]; then
    result="FOUND: $(ls "$findings" | tr '\n' ' ')"
  elif [ $rc -ne 0 ]; then
    result="ERROR rc=$rc (see $log)"
  fi
  printf '%-16s %6s s %12s execs  %s\n' "$target" "$seconds" "${execs:-?}" "$result" >"$work/$target.result"
}

run_fuzz() {
  local start=$SECONDS
  current=fuzz
  install_toolchain
  if [ ! -f "$asan_dir/CMakeCache.txt" ]; then configure "$asan_dir" -DRAPIDQA_FUZZ=ON -DRAPIDQA_BUILD_BENCHMARKS=OFF; fi
  say "building the fuzz targets in $asan_dir"
  locked cmake --build "$asan_dir" -j "$jobs" --target rapidqa-fuzz-all
  work=$asan_dir/fuzz-run
  rm -rf "$work/logs" "$work/findings" "$work"/*.result
  mkdir -p "$work/logs"
  # shellcheck source=sanitizers/options.sh
  source "$root/scripts/sanitizers/options.sh" address
  local targets=()
  for bin in "$asan_dir"/fuzz/fuzz_*; do
    if [ -x "$bin" ]; then targets+=("${bin##*/fuzz_}"); fi
  done
  say "fuzzing ${#targets[@]} targets for $fuzz_seconds s each, two at a time; logs in $work/logs"
  local i
  for ((i = 0; i < ${#targets[@]}; i += 2)); do
    local pair=("${targets[@]:i:2}") pids=()
    say "running ${pair[*]}"
    for t in "${pair[@]}"; do
      fuzz_one "$t" "$fuzz_seconds" &
      pids+=($!)
    done
    wait "${pids[@]}"
    for t in "${pair[@]}"; do cat "$work/$t.result"; done
  done
  printf '%-16s %8s %18s  %s\n' target time executions result
  local bad=0
  for t in "${targets[@]}"; do
    cat "$work/$t.result"
    grep -q ' ok$' "$work/$t.result" || bad=1
  done
  if ((bad)); then
    echo "reproduce a finding: $asan_dir/fuzz/fuzz_TARGET FILE; once fixed, commit FILE under tests/fuzz_regressions/TARGET/"
  fi
  record fuzz "$([ $bad -eq 0 ] && echo ok || echo FAILED)" \
    "${#targets[@]} targets x $fuzz_seconds s, findings under $work/findings, $((SECONDS - start)) s"
  return $bad
}

case "$mode" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  fuzz) run_fuzz ;;
  all)
    # Each step is a run of its own (so a build error stops only that
    # step), and each runs even when one before it failed.
    all_rc=0
    for step in asan tsan fuzz; do
      "${BASH_SOURCE[0]}" "$step" "$fuzz_seconds" || all_rc=1
    done
    exit $all_rc
    ;;
esac
