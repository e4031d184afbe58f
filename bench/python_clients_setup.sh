#!/usr/bin/env bash
# Installs the REAL Python benchmark clients that issue #3 compares servesweep with, each in its
# own venv OUTSIDE the repository, plus a tiny local tokenizer so that neither needs a GPU or the
# Hugging Face hub:
#   DIR/vllm      `vllm bench serve`                    (PyPI vllm, pinned below)
#   DIR/sglang    `python -m sglang.bench_serving`      (PyPI sglang, pinned below)
#   DIR/tokenizer a 1,000-word WordLevel tokenizer (words w0..w999, whitespace split, no special
#                 tokens added), saved with PreTrainedTokenizerFast.save_pretrained, and a
#                 config.json that only names a model type (gpt2); pass it as
#                 --tokenizer DIR/tokenizer with HF_HUB_OFFLINE=1.
# Both packages are installed with all their dependencies (CUDA torch wheels included, about
# 15 GB in all): the benchmark code only has to import, no GPU is used. Nothing of vLLM or
# SGLang is copied into this repository; bench/loadgen_vs_nginx.sh runs the installed packages
# when VLLM_BENCH / SGLANG_PYTHON point at them (the script prints the exact lines at the end).
#
# Usage: bench/python_clients_setup.sh [DIR=/work/venvs]
# Env: PYTHON (python3; 3.11 is what was tested), VLLM_VERSION, SGLANG_VERSION.
set -euo pipefail

DIR=${1:-/work/venvs}
PYTHON=${PYTHON:-python3}
VLLM_VERSION=${VLLM_VERSION:-0.33.0}
SGLANG_VERSION=${SGLANG_VERSION:-0.5.23}

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# install_client NAME SPEC: a venv DIR/NAME with SPEC and its dependencies.
install_client() {
  local name=$1 spec=$2
  [ -x "$DIR/$name/bin/python" ] || "$PYTHON" -m venv "$DIR/$name"
  "$DIR/$name/bin/pip" install --quiet "$spec"
}
install_client vllm "vllm==$VLLM_VERSION"
install_client sglang "sglang==$SGLANG_VERSION"

# The tokenizer, built with the tokenizers/transformers that vLLM's venv has.
HF_HUB_OFFLINE=1 "$DIR/vllm/bin/python" - "$DIR/tokenizer" <<'PY'
import json
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

out = sys.argv[1]
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
for i in range(1000):
    vocab[f"w{i}"] = len(vocab)
core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
# No decoder: decode joins the words with spaces, so decode(encode(x)) == x for "w1 w2 ...".
tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>",
                                    eos_token="</s>", model_max_length=4096)
tokenizer.save_pretrained(out)
# vLLM reads the folder's model config too (and retries, 2 s apart, when there is none).
with open(f"{out}/config.json", "w") as config:
    json.dump({"model_type": "gpt2", "vocab_size": len(vocab)}, config)
print(f"tokenizer: {out} ({len(vocab)} entries)")
PY

# show_versions NAME PACKAGE...: what the venv holds.
show_versions() {
  local name=$1
  shift
  "$DIR/$name/bin/python" - "$name" "$@" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
name, packages = sys.argv[1], sys.argv[2:]
found = []
for package in packages:
    try:
        found.append(f"{package} {version(package)}")
    except PackageNotFoundError:
        found.append(f"{package} (absent)")
print(f"{name}: Python {sys.version.split()[0]}; " + ", ".join(found))
PY
}
show_versions vllm vllm torch transformers tokenizers aiohttp numpy tqdm
show_versions sglang sglang torch transformers tokenizers aiohttp numpy tqdm requests

echo "for bench/loadgen_vs_nginx.sh:"
echo "  VLLM_BENCH=$DIR/vllm/bin/vllm SGLANG_PYTHON=$DIR/sglang/bin/python" \
  "PY_TOKENIZER=$DIR/tokenizer bench/loadgen_vs_nginx.sh"
