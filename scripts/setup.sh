#!/usr/bin/env bash
# One-command set-up for a Debian 12 machine: installs what is missing,
# builds rapidqa with both cores and ccache, then either runs the demo or the
# whole test suite.
#
#   scripts/setup.sh demo   # install, build, answer a question
#   scripts/setup.sh test   # install, build, run ctest
#   scripts/setup.sh build  # install and build only
#
# Run as root (or with sudo available) on a fresh machine; later runs skip
# the install when every package is present. BUILD_DIR overrides ./build.
# RAPIDQA_COMPONENTS=core installs and builds rapidqa::core alone (no
# LibTorch, no oneDNN; the model tools, model tests and benchmarks are left
# out); the default builds every component.
set -euo pipefail

mode=${1:-demo}
case "$mode" in demo|test|build) ;; *) echo "usage: $0 [demo|test|build]" >&2; exit 2 ;; esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
jobs=$(nproc 2>/dev/null || echo 2)

# Every package the build, tests and benchmarks use. libopenblas0-pthread is
# not optional in practice: with Debian's reference BLAS, LibTorch's matrix
# products run about 30x slower. oneDNN's CMake config asks for OpenCL
# headers, hence the ocl packages. python3-torch runs the independent
# reference the transformer tests compare against (tests/reference/).
# redis-server is only run by the tests and benchmarks, which start their own
# on a free loopback port; the system service the package may start is not
# used. postgresql-15 is run the same way by the PostgreSQL store tests
# (initdb and pg_ctl in a temporary directory); PostgreSQL refuses to run as
# root, so set-up creates the unprivileged user rapidqa-pg for them.
# rapidqa-server is built on libwebsockets (HTTP/1.1, WebSocket), nghttp2
# (HTTP/2) and gRPC C++
# (its stubs made by protoc and grpc_cpp_plugin); its tests drive it with
# clients written by others: curl, nghttp (nghttp2-client), Python
# websockets and grpcio (stubs from protoc's grpc_python_plugin), and
# openssl to make their certificates. The tokenizer tests compare with
# Hugging Face's own tokenizers library, the npm package "tokenizers" (its
# native binding), run by node; it is installed into BUILD_DIR/npm.
components=${RAPIDQA_COMPONENTS:-all}
case "$components" in core|all) ;; *) echo "RAPIDQA_COMPONENTS must be core or all, not '$components'" >&2; exit 2 ;; esac
core_packages=(
  build-essential cmake ninja-build ccache pkg-config git binutils
  libfaiss-dev libopenblas0-pthread libopenblas-dev liblapack-dev
  libfmt-dev nlohmann-json3-dev libutf8proc-dev libonig-dev python3-sentencepiece libhiredis-dev redis-server libssl-dev libsqlite3-dev sqlite3
  libcurl4-openssl-dev libsimdjson-dev
  libpq-dev postgresql-15
  catch2
  libwebsockets-dev libnghttp2-dev libgrpc++-dev protobuf-compiler protobuf-compiler-grpc
  curl openssl nghttp2-client python3-websockets python3-grpcio
  python3-jieba
)
model_packages=(
  libtorch-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  libbenchmark-dev python3-torch nginx-light
)
packages=("${core_packages[@]}")
cmake_options=(-DRAPIDQA_WITH_MODELS=OFF)
if [ "$components" = all ]; then
  packages+=("${model_packages[@]}")
  cmake_options=(-DRAPIDQA_WITH_MODELS=ON)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm: any that are already on the PATH serve (a node from another
# source, such as NodeSource's, bundles its own npm and conflicts with
# Debian's npm package); otherwise Debian's.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  for p in nodejs npm; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
if ((${#missing[@]})); then
  echo "==> installing ${#missing[@]} missing packages: ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The PostgreSQL tests run the server as this user when they run as root.
if [ "$(id -u)" -eq 0 ] && ! id -u rapidqa-pg >/dev/null 2>&1; then
  echo "==> creating the unprivileged user rapidqa-pg for the PostgreSQL tests"
  useradd --system --no-create-home --shell /usr/sbin/nologin rapidqa-pg
fi

# The version the tokenizer parity tests were written against.
tokenizers_npm=tokenizers@0.23.2
if [ ! -f "$build_dir/npm/node_modules/tokenizers/package.json" ] ||
   ! grep -q '"version": "0.23.2"' "$build_dir/npm/node_modules/tokenizers/package.json"; then
  echo "==> installing $tokenizers_npm (npm) into $build_dir/npm for the tokenizer tests"
  mkdir -p "$build_dir/npm"
  # The system's trust store (which holds any local CA the machine adds),
  # as curl and apt use it, rather than node's own bundle.
  npm_ca=()
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then npm_ca=(--cafile /etc/ssl/certs/ca-certificates.crt); fi
  npm install --no-audit --no-fund --loglevel=error "${npm_ca[@]}" --prefix "$build_dir/npm" "$tokenizers_npm"
fi

echo "==> configuring in $build_dir"
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cmake_options[@]}"
echo "==> building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"

case "$mode" in
  demo)
    echo "==> rapidqa-demo"
    "$build_dir/examples/rapidqa-demo" --question "How do I reset my password?"
    ;;
  test)
    echo "==> ctest"
    cd "$build_dir"
    ctest --output-on-failure -j "$jobs"
    ;;
  build) ;;
esac
