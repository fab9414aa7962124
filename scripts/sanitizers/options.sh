# Sanitizer run-time options for the rapidqa sanitizer and fuzz builds.
# Sourced (not run) by scripts/long-checks.sh and fuzz/run_regressions.sh;
# to run a sanitized binary or ctest by hand:
#
#   source scripts/sanitizers/options.sh address   # or: thread
#
# Every option is here for a reason given beside it; change one only with
# the run that shows why.
# shellcheck shell=bash

_rapidqa_sanitizers_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

case "${1:-address}" in
  address)
    asan=(
      # Stop at the first error and fail the process: a test that "passes"
      # with an ASan report printed is not a pass.
      halt_on_error=1
      # Use-after-return costs memory and time on every call; the tests and
      # fuzzers look for heap and scope errors (use_after_scope is on).
      detect_stack_use_after_return=0
      # A leak in our code is a finding; LibTorch, oneDNN, OpenBLAS and
      # FAISS keep their one-time allocations reachable, so lsan.supp is
      # empty (it says when a line may be added).
      detect_leaks=1
      # malloc/delete and new[]/delete mismatches are reported (the
      # default on Linux, kept on although LibTorch and friends are
      # uninstrumented: the interposed allocator sees their calls too).
      alloc_dealloc_mismatch=1
      # A global whose constructor reads another global not constructed yet
      # (the static initialisation order problem) is reported.
      check_initialization_order=1
      strict_init_order=1
      # Readable stacks with file:line (llvm-symbolizer comes with clang).
      symbolize=1
    )
    export ASAN_OPTIONS
    ASAN_OPTIONS=$(IFS=:; echo "${asan[*]}")
    export LSAN_OPTIONS="suppressions=$_rapidqa_sanitizers_dir/lsan.supp:print_suppressions=0"
    # -fno-sanitize-recover already makes a UBSan finding fatal; the stack
    # says where it came from.
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    ;;
  thread)
    tsan=(
      suppressions="$_rapidqa_sanitizers_dir/tsan.supp"
      # Report every race of a test, then fail it (exit code 66 at exit),
      # so one run lists them all.
      halt_on_error=0
      # The longest access history TSan keeps (2^(7+13) accesses per
      # thread): without it, long tests print "failed to restore the
      # stack" for the earlier access of a race.
      history_size=7
      # Both stacks of a lock-order inversion, not only the second.
      second_deadlock_stack=1
      symbolize=1
    )
    export TSAN_OPTIONS
    TSAN_OPTIONS=$(IFS=:; echo "${tsan[*]}")
    ;;
  *)
    echo "options.sh: address or thread, not '$1'" >&2
    return 2
    ;;
esac
unset _rapidqa_sanitizers_dir

# Per fuzz target adjustments, applied by the fuzz runners
# (scripts/long-checks.sh fuzz, fuzz/run_regressions.sh) before starting
# fuzz_<target>. None today: every target runs with leak checking. (LibTorch's
# archive reader leaks its zip state when it rejects a malformed archive;
# src/model/torchscript_reader.cpp keeps that one call out of LeakSanitizer's
# report, so the torchscript target needs no exception.) Add a case here,
# with its reason, only for a finding shown to lie inside a dependency.
rapidqa_fuzz_target_options() {
  case "$1" in
    *) ;;
  esac
}
