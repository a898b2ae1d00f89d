#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/*_fuzz.cc, docs/FUZZING.md) one after the other,
# one core each: installs what is missing (clang, libFuzzer), configures build-fuzz/
# with clang and -DEF_FUZZ=ON, builds the targets, then runs each for the given time
# on a fresh copy of its seed corpus fuzz/corpus/<target>/ (the repo's corpus is
# not written to unless --merge). Prints per target the executions, exec/s,
# coverage (edges, features), corpus size and findings (crash/leak/timeout/oom
# files, kept in <build dir>/fuzz-findings/<target>/); exits 1 if any target found
# something, 2 on a usage or build error.
# Usage: scripts/fuzz.sh [--seconds N] [--keep-going] [--merge] [--no-deps] [target...]
#   --seconds N   time per target (default 600)
#   --keep-going  do not stop a target at its first finding: libFuzzer's fork mode
#                 (-fork=1, still one core) records each crash/timeout and goes on
#   --merge       afterwards, merge the new inputs that add coverage into
#                 fuzz/corpus/<target>/ (libFuzzer -merge=1: only the useful ones)
#   --no-deps     skip scripts/install-deps.sh
#   --build-dir D build and run in D (default build-fuzz; the ctest uses its own)
#   target        decoder, config, reply_scanner, time_arg (default: all)
# Reproduce a finding: build-fuzz/<target>_fuzz <file>. docs/FUZZING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_TARGET=600
MERGE=0
KEEP_GOING=0
DEPS=1
BUILD_DIR=$ROOT/build-fuzz
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)
      [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ] ||
        { echo "fuzz: --seconds needs a positive whole number" >&2; exit 2; }
      SECONDS_PER_TARGET=$2
      shift ;;
    --merge) MERGE=1 ;;
    --keep-going) KEEP_GOING=1 ;;
    --no-deps) DEPS=0 ;;
    --build-dir)
      [ $# -ge 2 ] || { echo "fuzz: --build-dir needs a directory" >&2; exit 2; }
      BUILD_DIR=$(realpath -m "$2")
      shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) TARGETS+=("$1") ;;
  esac
  shift
done
ALL=()
for f in fuzz/*_fuzz.cc; do
  n=${f#fuzz/}
  ALL+=("${n%_fuzz.cc}")
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
  [ -f "fuzz/${t}_fuzz.cc" ] || { echo "fuzz: no target '$t' (have: ${ALL[*]})" >&2; exit 2; }
done

[ "$DEPS" = 0 ] || scripts/install-deps.sh
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
mkdir -p "$BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -DEF_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEF_BUILD_TESTS=OFF -DEF_BUILD_BENCH=OFF "${LAUNCHER[@]}" \
  >"$BUILD_DIR/configure.log" 2>&1 ||
  { cat "$BUILD_DIR/configure.log" >&2; echo "fuzz: configure failed" >&2; exit 2; }
build_targets=()
for t in "${TARGETS[@]}"; do build_targets+=(--target "${t}_fuzz"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${build_targets[@]}" >"$BUILD_DIR/build.log" 2>&1 ||
  { tail -40 "$BUILD_DIR/build.log" >&2; echo "fuzz: build failed ($BUILD_DIR/build.log)" >&2; exit 2; }
echo "fuzz: built ${TARGETS[*]} in $(( $(date +%s) - start )) s; ${SECONDS_PER_TARGET} s per target"

# Any sanitizer report is fatal (UBSan too: -fno-sanitize-recover), with a stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The config loader reads secrets from the environment: fuzz without them.
unset $(env | sed -n 's/^\(EXPOSURE_FILTER_[A-Z0-9_]*\)=.*/\1/p')

found=0
printf '%-14s %12s %8s %6s %7s %8s  %s\n' target executions exec/s cov ft corpus findings
summary=()
for t in "${TARGETS[@]}"; do
  run=$BUILD_DIR/fuzz-run/$t
  findings=$BUILD_DIR/fuzz-findings/$t
  rm -rf "$run" "$findings"
  mkdir -p "$run/corpus" "$findings"
  cp -r "fuzz/corpus/$t/." "$run/corpus/" 2>/dev/null || true
  rc=0
  mode=()
  [ "$KEEP_GOING" = 0 ] || mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  # -timeout: an input taking > 10 s is a finding (a hang); one core, one process.
  "$BUILD_DIR/${t}_fuzz" "${mode[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/" "$run/corpus" \
    >"$run/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$run/log" | tail -1)
  last=$(grep -a -E '^#[0-9]+' "$run/log" | tail -1 || true)
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
  [ -n "$rate" ] || rate=$(sed -n 's/.* exec\/s:\{0,1\} \([0-9]*\).*/\1/p' <<<"$last")
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  units=$(find "$run/corpus" -type f | wc -l)
  files=$(find "$findings" -type f | sort)
  nfiles=$(grep -c . <<<"$files" || true)
  if [ "$nfiles" -gt 0 ] || [ "$rc" -ne 0 ]; then
    found=1
    what="${nfiles} file(s), exit $rc: $(echo $files) (log $run/log)"
  else
    what=none
  fi
  printf '%-14s %12s %8s %6s %7s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "$units" "$what"
  if [ "$what" != none ]; then
    grep -a -E 'ERROR|SUMMARY|_fuzz: |runtime error' "$run/log" | head -5 | sed 's/^/    /'
  fi
  grep -a '_fuzz: note:' "$run/log" | head -3 | sed 's/^/    /' || true
  if [ "$MERGE" = 1 ]; then
    before=$(find "fuzz/corpus/$t" -type f | wc -l)
    "$BUILD_DIR/${t}_fuzz" -merge=1 -timeout=10 "fuzz/corpus/$t" "$run/corpus" >"$run/merge.log" 2>&1 ||
      echo "fuzz: merge of $t failed ($run/merge.log)" >&2
    echo "    merged into fuzz/corpus/$t: $before -> $(find "fuzz/corpus/$t" -type f | wc -l) files"
  fi
done
if [ "$found" = 1 ]; then
  echo "fuzz: FINDINGS (reproduce with $BUILD_DIR/<target>_fuzz <file>)"
  exit 1
fi
echo "fuzz: no findings"
