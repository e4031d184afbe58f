"""`sglang serve ARGS` (or the legacy `python -m sglang.launch_server ARGS`) through SGLang's
own argument handling and resolution, without a GPU or weights.

In SGLang's own order (sglang/cli/serve.py, sglang/launch_server.py): `sglang serve`'s
--model-type and positional-model handling, load_plugins, prepare_server_args (its parser,
--config merging, ServerArgs.from_cli_args) and resolve_once(): the resolution pipeline of
sglang/srt/arg_groups/*_hook.py that decides every default (memory tier, attention backend,
speculative parameters, DP attention, disaggregation) and validates the combination. Nothing
is started: no scheduler, no tokenizer process, no kernels.

The device: SGLang asks torch.cuda directly and reads the memory tier from nvidia-smi, so the
few torch.cuda device queries are answered from GpuFacts (patched before sglang is imported)
and an `nvidia-smi` answering the same facts is put first on PATH. SGLang itself is untouched.
"""
import argparse
import os
import time
import warnings

import check_common

TRANSFER_BACKEND_MODULES = {  # disaggregation backend -> the module it imports at start
    "nixl": ("nixl", "nixl._api"),
    "mooncake": ("mooncake-transfer-engine", "mooncake.engine"),
}
# SGLang's algorithm names -> servesweep's (the matrix spelling, docs/engines.md).
METHOD_NAMES = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp", "NGRAM": "ngram",
                "STANDALONE": "draft"}


class SglangServeChecker:
    kind = "sglang-serve"

    def __init__(self, facts, records):
        self.facts, self.records = facts, records
        started = time.monotonic()
        self._patch_torch()
        os.environ["PATH"] = (check_common.write_fake_nvidia_smi(facts) + os.pathsep +
                              os.environ.get("PATH", ""))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import sglang
            from sglang.srt.arg_groups.overrides import resolving_view
            from sglang.srt.plugins import load_plugins
            from sglang.srt.server_args import ServerArgs, prepare_server_args
            load_plugins()  # as sglang serve and launch_server do before parsing
        self.version = sglang.__version__
        self.ServerArgs, self.prepare_server_args = ServerArgs, prepare_server_args
        self.resolving_view = resolving_view
        self.import_s = time.monotonic() - started

    def _patch_torch(self):
        import torch
        facts = self.facts

        class Properties:
            def __init__(self):
                self.name, self.major, self.minor = facts.name, *facts.capability
                self.total_memory, self.multi_processor_count = facts.memory_bytes, 132
                self.L2_cache_size, self.is_integrated, self.warp_size = 50 << 20, False, 32
                self.gcnArchName, self.uuid = "", "GPU-servesweep-check"

        cuda = torch.cuda
        cuda.is_available = lambda: True
        cuda.device_count = lambda: check_common.visible_gpu_count(facts)
        cuda.get_device_capability = lambda device=None: facts.capability
        cuda.get_device_name = lambda device=None: facts.name
        cuda.get_device_properties = lambda device=None: Properties()
        cuda.mem_get_info = lambda device=None: (facts.memory_bytes, facts.memory_bytes)
        cuda.current_device = lambda: 0

    def _server_argv(self, entry, args):
        """What `sglang serve` hands prepare_server_args (its own helpers, when this version
        has them); the legacy entry passes the arguments as they are."""
        if entry != "sglang serve":
            return list(args)
        import sglang.cli.serve as serve
        argv = list(args)
        if hasattr(serve, "_extract_model_type_override"):
            _, argv = serve._extract_model_type_override(argv)
        if hasattr(serve, "_normalize_positional_model_path"):
            argv, _ = serve._normalize_positional_model_path(argv)
        return argv

    def check(self, args, result, entry):
        parser = argparse.ArgumentParser(prog="sglang serve")
        self.ServerArgs.add_cli_args(parser)  # the parser prepare_server_args builds
        with warnings.catch_warnings(record=True) as python_warnings:
            warnings.simplefilter("always")
            try:
                result["stage"] = "parse"
                argv = self._server_argv(entry, args)
                result["spellings"] = check_common.option_spelling_notes(parser, argv)
                check_common.parse_or_refuse(parser, argv)  # argparse's message, if it fails
                server_args = self.prepare_server_args(argv)
                result["stage"] = "resolve"
                server_args.resolve_once()
                result["stage"] = "packages"
                result["resolved"], result["effective"] = self._resolved(server_args)
                result["missing_packages"] = self._transfer_needs(result["resolved"])
                result["accepted"] = not result["missing_packages"]
                result["stage"] = "done"
            except BaseException as e:  # noqa: BLE001 - every refusal is the engine's answer
                result["error"] = check_common.refusal_message(e, ["sglang"])
                result["model_unavailable"] = check_common.model_config_unavailable(e)
            finally:
                result["warnings"] = check_common.engine_warnings(
                    self.records.take(), python_warnings, ("sglang",))

    def _resolved(self, server_args):
        view = self.resolving_view(server_args)

        def field(name):
            try:
                value = getattr(view, name)
            except Exception:  # noqa: BLE001 - a field this version lacks
                return None
            return value if value is None or isinstance(value, (bool, int, float, str)) \
                else str(value)

        names = ["model_path", "dtype", "context_length", "quantization", "kv_cache_dtype",
                 "max_prefill_tokens", "chunked_prefill_size", "max_running_requests",
                 "max_total_tokens", "disable_radix_cache", "mem_fraction_static", "page_size",
                 "tp_size", "pp_size", "dp_size", "attn_dp_size", "ep_size", "nnodes",
                 "node_rank", "speculative_algorithm", "speculative_num_steps",
                 "speculative_eagle_topk", "speculative_num_draft_tokens",
                 "speculative_draft_model_path", "disaggregation_mode",
                 "disaggregation_transfer_backend", "disaggregation_bootstrap_port",
                 "attention_backend", "tokenizer_worker_num"]
        raw = {name: field(name) for name in names}
        # The algorithm as given (NEXTN resolves to EAGLE with the target's own MTP layers).
        given_method = getattr(server_args, "speculative_algorithm", None)
        raw["speculative_algorithm_given"] = given_method
        chunk = raw["chunked_prefill_size"]
        model = self._model_config(server_args)
        model_dtype = raw["dtype"] if raw["dtype"] not in (None, "auto") else \
            str(getattr(model, "dtype", "auto")).replace("torch.", "")
        context = raw["context_length"] or getattr(model, "context_len", None)
        kv_dtype = raw["kv_cache_dtype"]
        running = raw["max_running_requests"]
        effective = {
            # Prompt tokens one prefill batch may take (the first request of a batch may exceed
            # it when chunking is off).
            "prefill_budget_tok": raw["max_prefill_tokens"],
            "prefill_chunk_tok": chunk if chunk and chunk > 0 else "off",
            # Unset, SGLang sizes it from the KV pool when the weights are loaded.
            "max_running_requests": running if running is not None
            else "n/a: sized from the KV pool at load",
            "context_len_tok": context if context else "n/a: not resolved",
            "kv_cache_dtype": (model_dtype if kv_dtype in (None, "auto") else kv_dtype),
            "prefix_caching": "off" if raw["disable_radix_cache"] else "on",
            "spec_method": "none",
            # HTTP/tokenizer processes in front of the scheduler (vLLM's API servers).
            "api_servers": raw["tokenizer_worker_num"] or 1,
        }
        if given_method:
            effective["spec_method"] = METHOD_NAMES.get(str(given_method).upper(),
                                                        str(given_method).lower())
            # num_draft_tokens counts the verified root token as well (EAGLE chains:
            # num_steps + 1; NGRAM: the last token, then its drafts).
            if raw["speculative_num_draft_tokens"]:
                effective["spec_draft_tokens_per_step"] = raw["speculative_num_draft_tokens"] - 1
        return raw, effective

    @staticmethod
    def _model_config(server_args):
        """The model's config as SGLang's resolution read it (dtype, context length)."""
        try:
            from sglang.srt.arg_groups.overrides import model_config_of
            return model_config_of(server_args)
        except Exception:  # noqa: BLE001 - another layout of SGLang
            return None

    def _transfer_needs(self, raw):
        if raw.get("disaggregation_mode") in (None, "null"):
            return []
        backend = raw.get("disaggregation_transfer_backend")
        needs = TRANSFER_BACKEND_MODULES.get(backend)
        if needs is None:
            return []
        ok, why = check_common.module_available(needs[1])
        return [] if ok else ["%s (import %s: %s), which the %s transfer backend needs" % (
            needs[0], needs[1], why, backend)]
