# Shared set-up for scripts/demo, scripts/test and scripts/fuzz: install missing Debian
# packages, then configure and build Release into build/ (go_build), the sanitizer build into
# build-asan/ (go_build_sanitized) or the libFuzzer targets into build-fuzz/ (go_fuzz_configure_build).
set -euo pipefail

GO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GO_BUILD="${GO_BUILD:-$GO_ROOT/build}"
GO_JOBS="${GO_JOBS:-$(nproc)}"

# Everything the build, the tests and the benchmarks need, as Debian packages. Debian builds
# oneDNN with the OpenCL GPU runtime, so its CMake config needs the OpenCL headers and loader, which
# libdnnl-dev only recommends (and --no-install-recommends skips): ocl-icd-opencl-dev is listed here.
# The Python module (python/) needs pybind11, Python's headers and numpy, for Debian's python3.
GO_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev catch2 libbenchmark-dev libcli11-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libmetis-dev coinor-libcbc-dev libopenmpi-dev openmpi-bin
  clang-14 libclang-rt-14-dev libomp-14-dev
  pybind11-dev python3-dev python3-numpy
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

# Whether $1 holds a finished configuration: a configure that failed (a package was missing, say)
# leaves CMakeCache.txt but no build file, and must run again.
go_configured() {
  [ -f "$1/CMakeCache.txt" ] && { [ -f "$1/build.ninja" ] || [ -f "$1/Makefile" ]; }
}

# The CUDA architectures to build for (cmake arguments). GO_CUDA_ARCHITECTURES overrides; on a
# machine with nvcc but no GPU, PTX for compute_80 only: the build then checks that the CUDA code
# compiles, and a GPU (sm_80 or newer) the build is copied to compiles the PTX when first used.
# Machine code for sm_80 and sm_90 (CMakeLists.txt's default) took 227 of the Release build's
# 1,718 CPU-s in CI; the PTX alone 58 (README, the CI runs).
go_cuda_args() {
  if [ -n "${GO_CUDA_ARCHITECTURES:-}" ]; then
    echo "-DCMAKE_CUDA_ARCHITECTURES=$GO_CUDA_ARCHITECTURES"
  elif { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } &&
       ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "-DCMAKE_CUDA_ARCHITECTURES=80-virtual"
  fi
}

go_build() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if ! go_configured "$GO_BUILD"; then
    local cuda=()
    read -r -a cuda <<< "$(go_cuda_args)"
    go_log "configuring $GO_BUILD (Release${cuda:+, CUDA architectures ${cuda#*=}})"
    cmake -S "$GO_ROOT" -B "$GO_BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "$@"
  fi
  go_log "building with $GO_JOBS jobs"
  cmake --build "$GO_BUILD" -j "$GO_JOBS" "${GO_BUILD_TARGETS[@]/#/--target=}"
}

# clang++ for the fuzz targets (libFuzzer comes with Debian's libclang-rt-14-dev).
go_find_clang() {
  local c
  for c in clang++-14 clang++; do
    if command -v "$c" >/dev/null; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

# Sanitizer flags shared by build-asan and build-fuzz: ASan + UBSan, and any UBSan report is fatal.
GO_SANITIZE_FLAGS=(-DGO_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS=-fno-sanitize-recover=all
                   -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGO_CUDA=OFF -DGO_BUILD_BENCH=OFF)
# Run-time options: leaks are errors too; a report stops the test with a stack.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# The whole library, tests and examples with AddressSanitizer + UndefinedBehaviorSanitizer (GCC,
# -Og -g1: half the compile time of -O1 (CI is mostly these two builds), tests still fast, exact
# line numbers) into $1 (default build-asan).
go_build_sanitized() {
  local dir="${1:-$GO_ROOT/build-asan}" generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if ! go_configured "$dir"; then
    go_log "configuring $dir (AddressSanitizer + UndefinedBehaviorSanitizer)"
    cmake -S "$GO_ROOT" -B "$dir" "${generator[@]}" "${GO_SANITIZE_FLAGS[@]}" \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-Og -g1" >/dev/null
  fi
  go_log "building $dir with $GO_JOBS jobs"
  cmake --build "$dir" -j "$GO_JOBS"
}

# The libFuzzer targets of tests/fuzz with clang, ASan and UBSan into $1 (default build-fuzz).
# Configure runs every time: it refreshes the seed corpora (symlinks) of tests/fuzz/CMakeLists.txt.
go_fuzz_configure_build() {
  local dir="${1:-$GO_ROOT/build-fuzz}" generator=() cxx
  command -v ninja >/dev/null && generator=(-G Ninja)
  cxx="$(go_find_clang)" || { echo "error: scripts/fuzz needs clang++ (Debian: clang-14 libclang-rt-14-dev)" >&2; return 1; }
  local cfg=()
  if ! go_configured "$dir"; then
    go_log "configuring $dir (clang libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer)"
    # -Wno-pass-failed: clang at -O1 warns of `omp simd` loops it did not vectorize.
    cfg=(-S "$GO_ROOT" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" "${GO_SANITIZE_FLAGS[@]}" -DGO_FUZZ=ON
         "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DGO_BUILD_TESTS=OFF -DGO_BUILD_EXAMPLES=OFF
         "-DCMAKE_CXX_FLAGS=-fno-sanitize-recover=all -Wno-pass-failed")
  fi
  cmake -B "$dir" "${cfg[@]}" >/dev/null
  go_log "building the fuzz targets in $dir with $GO_JOBS jobs"
  cmake --build "$dir" -j "$GO_JOBS"
}
