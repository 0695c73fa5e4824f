# Sourced by fuzz/run.sh and fuzz/tsan.sh: sets TG_CC / TG_CXX to a clang that compiles the
# library, with its sanitizer, libFuzzer and OpenMP (libomp) runtimes, and installs those Debian 12
# packages when they are missing. Debian's default clang (14) cannot: std::source_location needs
# clang >= 15, and a lambda that captures a structured binding (the engine had one) compiles
# with -fopenmp only from clang 17 or so (16 says "not yet supported in OpenMP"). Debian 12 has
# clang-19. Override with CC=... CXX=... (another clang >= 17).
tg_packages=(clang-19 libclang-rt-19-dev libomp-19-dev)
if [ -z "${CXX:-}" ]; then
  tg_missing=()
  for p in "${tg_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || tg_missing+=("$p")
  done
  if ((${#tg_missing[@]})); then
    echo "fuzz: installing ${tg_missing[*]}" >&2
    tg_sudo=""
    [ "$(id -u)" -eq 0 ] || tg_sudo="sudo"
    $tg_sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $tg_sudo apt-get install -y -qq --no-install-recommends \
      "${tg_missing[@]}" >/dev/null
  fi
  TG_CC=clang-19
  TG_CXX=clang++-19
else
  TG_CC="${CC:-clang}"
  TG_CXX="$CXX"
fi
