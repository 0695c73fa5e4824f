#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build/fuzz and runs each for a bounded
# time on a copy of its seed corpus in fuzz/corpus/. Exits non-zero on any crash, leak, timeout
# or sanitizer report; the reproducer is kept in build/fuzz/artifacts/.
#   fuzz/run.sh [seconds per target, default 60]
# Reproduce a finding:  build/fuzz/fuzz/<target> build/fuzz/artifacts/<target>-crash-...
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
build=build/fuzz
targets=(npy_fuzz safetensors_fuzz idx_fuzz attention_fuzz train_init_fuzz)

# clang 19 (Debian 12's clang-19; see fuzz/clang.sh for why not the default clang 14).
source fuzz/clang.sh

mkdir -p "$build"
if ! { CC="$TG_CC" CXX="$TG_CXX" cmake -S . -B "$build" -G Ninja \
         -DCMAKE_BUILD_TYPE=Debug -DTAPEGRAD_BUILD_FUZZ=ON -DTAPEGRAD_BUILD_TESTS=OFF \
         -DTAPEGRAD_BUILD_TOOLS=OFF -DTAPEGRAD_NATIVE=OFF -DTAPEGRAD_BLAS=OFF -DTAPEGRAD_MPI=OFF &&
       cmake --build "$build" --target "${targets[@]}"; } >"$build/build.log" 2>&1; then
  cat "$build/build.log" >&2
  exit 1
fi

# Scratch on tmpfs when there is one: attention_fuzz writes (and fsyncs) eight files per input.
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm="${TMPDIR:-/tmp}"
work="$(mktemp -d "$shm/tapegrad_fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/artifacts"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMP_NUM_THREADS=1
symbolizer="$(command -v llvm-symbolizer || true)"
if [ -n "$symbolizer" ]; then
  ASAN_OPTIONS+=":external_symbolizer_path=$symbolizer"
  UBSAN_OPTIONS+=":external_symbolizer_path=$symbolizer"
fi

# One target per core at a time (libFuzzer runs one thread): each still fuzzes for `secs`.
fuzz_one() {
  local t="$1" corpus="$work/$1-corpus" log="$build/artifacts/$1.log" dict=fuzz/npy.dict rc=0
  cp -r "fuzz/corpus/${t%_fuzz}" "$corpus"
  mkdir -p "$work/$t-tmp"
  # (the attention target's inputs are .npy files too)
  [ "$t" = safetensors_fuzz ] || [ "$t" = train_init_fuzz ] && dict=fuzz/safetensors.dict
  TG_FUZZ_TMPDIR="$work/$t-tmp" "$build/fuzz/$t" "$corpus" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -dict="$dict" -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 \
    >"$log" 2>&1 || rc=$?
  local runs units
  runs="$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$log")"
  units="$(find "$corpus" -type f | wc -l)"
  if [ "$rc" -eq 0 ] && [ -n "$runs" ]; then
    echo "$t: ok, $runs, corpus $units units"
  else
    # (one write, so that another target's lines cannot fall inside it)
    local report
    report="$t: FAILED (exit $rc), log $log:
$(grep -E "ERROR|BUG|SUMMARY|Test unit written|==[0-9]+==" "$log" | head -20 || true)"
    echo "$report" >&2
    return 1
  fi
}

cores="$(nproc)"
pids=()
# Interrupted: the targets running stop too (before the EXIT trap removes their scratch).
trap 'for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; exit 130' INT TERM
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do wait -n || true; done
  fuzz_one "$t" &
  pids+=("$!")
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit "$status"
