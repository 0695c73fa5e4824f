#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running tapegrad:
#   ./build.sh demo   install what is missing, build (Release), run `tapegrad demo`
#   ./build.sh test   install what is missing, build (Release), run every test
#   ./build.sh train  install what is missing, build (Release), train nanoGPT's CPU recipe on
#                     the English text of Debian's `fortunes` package for a few minutes, sample
#   ./build.sh fashion  install what is missing (dataset-fashion-mnist too), build (Release),
#                     train pytorch/examples' MNIST Net on Fashion-MNIST for 3 epochs (the
#                     image recipe: AdamW, the rate decayed to 0), print the test accuracy
#   ./build.sh asan   the same tests built with AddressSanitizer + UBSan
#   ./build.sh avx2   the same tests as an AVX2 CPU (Haswell, Zen) runs them: the kernels built
#                     for x86-64-v3 (Eigen's 256-bit packets) and BLIS forced to its Haswell
#                     kernels, so a result that holds only for this CPU's kernels fails here
#                     (on a CPU whose own kernels are x86-64-v3's, by the release build)
set -euo pipefail
cd "$(dirname "$0")"

mode="${1:-demo}"
case "$mode" in
  demo | test | train | fashion) preset=release ;;
  asan) preset=asan ;;
  avx2) preset=avx2 ;;
  *) echo "usage: ./build.sh [demo|test|train|fashion|asan|avx2]" >&2; exit 2 ;;
esac

# Debian packages the build and the tests need; only the missing ones are installed.
packages=(cmake ninja-build g++ libeigen3-dev libblis-openmp-dev libcli11-dev libgtest-dev libbenchmark-dev
          nlohmann-json3-dev zlib1g-dev python3 python3-numpy python3-torch libopenblas0-pthread
          openmpi-bin libopenmpi-dev)
[ "$mode" = train ] && packages+=(fortunes)  # the training text
# Fashion-MNIST, which the image reader's tests read (and a run on images trains on).
case "$mode" in test | fashion | asan | avx2) packages+=(dataset-fashion-mnist) ;; esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "build.sh: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$mode" = avx2 ]; then
  if ! grep -qw avx2 /proc/cpuinfo; then
    echo "build.sh: ./build.sh avx2 runs the tests with AVX2 kernels, and this CPU has no AVX2" >&2
    exit 1
  fi
  # Eigen picks its kernels by the vector instruction sets the compiler targets. Where this CPU's
  # own (-march=native, the release build's) are x86-64-v3's (AVX2 + FMA, no AVX-512), the release
  # build has the AVX2 kernels already: it runs the tests, with BLIS forced to its Haswell kernels
  # (no second build). Elsewhere (an AVX-512 CPU, say) the x86-64-v3 build of its own does.
  vector_isa() {
    "${CXX:-g++}" -march="$1" -dM -E - </dev/null |
      grep -oE '__(SSE[0-9_]*|SSSE3|AVX[0-9A-Z_]*|FMA|F16C)__' | sort | tr '\n' ' '
  }
  native_isa="$(vector_isa native)"
  if [[ "$native_isa" == *__AVX2__* ]] && [ "$native_isa" = "$(vector_isa x86-64-v3)" ]; then
    echo "build.sh: this CPU's kernels are x86-64-v3's; the release build runs the tests" >&2
    preset=release
    export BLIS_ARCH_TYPE=3  # BLIS's Haswell kernels, as the avx2 test preset sets
  fi
fi

cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"

if [ "$mode" = demo ]; then
  exec ./build/release/tools/tapegrad demo
fi
if [ "$mode" = train ]; then
  # Every fortune file of the package, one text (2.5 MB of English), char level; the model and
  # optimizer flags are tapegrad train's defaults: nanoGPT's CPU recipe for shakespeare_char.
  find /usr/share/games/fortunes -type f ! -name '*.dat' | sort | xargs cat > build/fortunes.txt
  ./build/release/tools/tapegrad train --text build/fortunes.txt --out build/fortunes_model
  echo "build.sh: a sample from the model (build/fortunes_model; loss plot in loss.svg):" >&2
  ./build/release/tools/tapegrad sample --ckpt build/fortunes_model --prompt "The " --tokens 400
  echo
  exit 0
fi
if [ "$mode" = fashion ]; then
  # The image recipe: --arch cnn, batch 64, AdamW (lr 1e-3, torch's defaults) with the rate
  # decayed to 0 over the 3 epochs by the cosine schedule (--lr-min 0; the flags' default is a
  # constant rate, as pytorch/examples), the 10,000 test images scored after every epoch.
  rm -rf build/fashion_model
  ./build/release/tools/tapegrad train --images /usr/share/datasets/fashion-mnist --epochs 3 \
    --lr-min 0 --out build/fashion_model
  accuracy=$(tail -n 1 build/fashion_model/metrics.csv | cut -d, -f11)
  echo "build.sh: test accuracy after 3 epochs: $accuracy (build/fashion_model; plot in loss.svg)"
  exit 0
fi
ctest --preset "$preset" -j 2
