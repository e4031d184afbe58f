#!/usr/bin/env bash
# Installs the Python engines whose own argument handling checks servesweep's command lines
# (engines/engine_check.h) and whose metric names and option strings the tables are
# checked against (tests/e2e/engine_check_e2e_test.cc), at the versions the flag tables were
# checked against, each in a virtual environment outside the clone that later runs reuse:
#   /opt/servesweep-pyengines/vllm         vllm 0.33.0, vllm-router 0.1.17
#   /opt/servesweep-pyengines/sglang       sglang 0.5.23, sglang-router 0.3.2
#   /opt/servesweep-pyengines/vllm-0.11.0  vllm 0.11.0 (the older table's checked version)
# plus the KV transfer libraries the engine wheels do not bring (nixl; mooncake-transfer-engine
# where the engine's torch is CUDA 13), and, for machines without an NVIDIA driver, a stand-in
# libcuda.so.1 built from the symbols those libraries reference (make_cuda_stub.py: every call
# answers "no device"; nothing runs on it). CPU-only use: the engines are imported, never
# served. Idempotent: an environment whose marker lists the same requirements is kept as it is.
# Measured on the 2-core development machine: see docs/engines.md#engine-check (about 10 GB
# and 3 to 5 minutes per environment the first time; seconds once cached). Needs root (or sudo),
# python3-venv, a C compiler and binutils (scripts/install-deps.sh).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
ROOT=/opt/servesweep-pyengines
HERE="$(cd "$(dirname "$0")/.." && pwd)"
STUB="$HERE/engines/check/make_cuda_stub.py"
# name|requirements (pip specifiers, space-separated)
ENVIRONMENTS=(
  "vllm|vllm==0.33.0 vllm-router==0.1.17 nixl==1.5.1 mooncake-transfer-engine-cuda13==0.3.14"
  "sglang|sglang==0.5.23 sglang-router==0.3.2 nixl==1.5.1 mooncake-transfer-engine-cuda13==0.3.14"
  "vllm-0.11.0|vllm==0.11.0 nixl==1.5.1"
)
NEEDED_GB=12  # per environment being installed

install_one() {
  local name=$1 requirements=$2 venv=$ROOT/$1
  if [ -f "$venv/.servesweep-installed" ] && [ "$(cat "$venv/.servesweep-installed")" = "$requirements" ] &&
     [ -f "$venv/lib/servesweep-cuda-stub/libcuda.so.1" ]; then
    echo "install-pyengines: $name already installed ($venv: $requirements)"
    return 0
  fi
  local free_gb
  free_gb=$(df -BG --output=avail "$($SUDO mkdir -p "$ROOT" && echo "$ROOT")" | tail -1 | tr -dc '0-9')
  if [ "$free_gb" -lt "$NEEDED_GB" ]; then
    echo "install-pyengines: ERROR: $name needs about ${NEEDED_GB} GB, $ROOT has ${free_gb} GB free" >&2
    return 1
  fi
  local start
  start=$(date +%s)
  $SUDO rm -rf "$venv"
  $SUDO /usr/bin/python3 -m venv "$venv"
  $SUDO "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir --progress-bar off \
    --upgrade pip || return 1
  # shellcheck disable=SC2086 # the requirements are words
  $SUDO "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir --progress-bar off \
    $requirements || return 1
  # The first import compiles every module; compiled here, the checks pay only the import.
  $SUDO "$venv/bin/python" -m compileall -q -j 0 "$venv/lib" >/dev/null 2>&1 || true
  # Inside `install_one ... || status=1` set -e does not apply: each step that must succeed says so.
  $SUDO "$venv/bin/python" "$STUB" || return 1
  echo "$requirements" | $SUDO tee "$venv/.servesweep-installed" >/dev/null
  echo "install-pyengines: $name installed in $(( $(date +%s) - start )) s, $($SUDO du -sh "$venv" | cut -f1)"
}

status=0
for entry in "${ENVIRONMENTS[@]}"; do
  install_one "${entry%%|*}" "${entry#*|}" || status=1
done
exit $status
