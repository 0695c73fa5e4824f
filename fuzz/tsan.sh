#!/usr/bin/env bash
# Builds tests/thread_test with ThreadSanitizer (clang, libomp + Archer) in build/tsan and runs
# it; exits non-zero on a failed test or any TSan report.
#   fuzz/tsan.sh
# clang rather than gcc: gcc's OpenMP runtime (libgomp) is not TSan-aware, so its barriers give
# false races. With clang's libomp, Archer (libarcher.so, an OMPT tool shipped beside libomp)
# tells TSan about OpenMP's synchronisation; libomp looks for it by name only, so it is named
# with OMP_TOOL_LIBRARIES, and ARCHER_OPTIONS=verbose=1 makes it say so (checked below). No
# suppression file, and OpenMP stays on (2 threads). BLIS is off here (TAPEGRAD_BLAS=OFF): it is
# built on gcc's libgomp, and one process must not hold two OpenMP runtimes. The library's
# sources compile one by one here (TAPEGRAD_UNITY_BUILD=OFF; every other build batches them), so
# a source that leans on an include of the one before it in its batch fails here.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/tsan
source fuzz/clang.sh

flags="-fsanitize=thread -fno-omit-frame-pointer -gline-tables-only"
mkdir -p "$build"
if ! { CC="$TG_CC" CXX="$TG_CXX" cmake -S . -B "$build" -G Ninja \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAPEGRAD_BUILD_TESTS=ON -DTAPEGRAD_BUILD_TOOLS=ON \
         -DTAPEGRAD_NATIVE=OFF -DTAPEGRAD_BLAS=OFF -DTAPEGRAD_MPI=OFF -DTAPEGRAD_UNITY_BUILD=OFF \
         -DCMAKE_CXX_FLAGS="$flags" \
         -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" &&
       cmake --build "$build" --target thread_test; } >"$build/build.log" 2>&1; then
  cat "$build/build.log" >&2
  exit 1
fi

# halt_on_error: the first report fails the run. ignore_noninstrumented_modules: libomp itself
# is not instrumented (Archer's README asks for this flag).
export TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1"
symbolizer="$(command -v llvm-symbolizer || true)"
[ -z "$symbolizer" ] || TSAN_OPTIONS+=":external_symbolizer_path=$symbolizer"
export OMP_NUM_THREADS=2
OMP_TOOL_LIBRARIES="$("$TG_CXX" -print-file-name=libarcher.so)"
export OMP_TOOL_LIBRARIES
export ARCHER_OPTIONS="verbose=1"
log="$build/thread_test.log"
rc=0
"$build/tests/thread_test" --gtest_brief=1 >"$log" 2>&1 || rc=$?
if ! grep -q "Archer detected OpenMP application with TSan" "$log"; then
  echo "tsan.sh: Archer ($OMP_TOOL_LIBRARIES) was not loaded: OpenMP would give false races" >&2
  rc=1
fi
grep -v "^Archer detected OpenMP application" "$log" || true
exit "$rc"
