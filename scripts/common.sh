# Shared set-up for scripts/demo and scripts/test: install missing Debian
# packages, then configure and build Release into build/.
set -euo pipefail

GO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GO_BUILD="${GO_BUILD:-$GO_ROOT/build}"
GO_JOBS="${GO_JOBS:-$(nproc)}"

# Everything the build, the tests and the benchmarks need, as Debian packages.
GO_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev libdnnl-dev nlohmann-json3-dev catch2 libbenchmark-dev libcli11-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libmetis-dev libopenmpi-dev openmpi-bin
)

go_log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

go_install_packages() {
  local missing=()
  for p in "${GO_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    go_log "all ${#GO_PACKAGES[@]} required packages are installed"
    return
  fi
  go_log "installing missing packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo="sudo -n"
    else
      echo "error: missing packages ${missing[*]} and no root rights to install them;" \
           "run: sudo apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

go_build() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if [ ! -f "$GO_BUILD/CMakeCache.txt" ]; then
    go_log "configuring $GO_BUILD (Release)"
    cmake -S "$GO_ROOT" -B "$GO_BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
  fi
  go_log "building with $GO_JOBS jobs"
  cmake --build "$GO_BUILD" -j "$GO_JOBS" "${GO_BUILD_TARGETS[@]/#/--target=}"
}
