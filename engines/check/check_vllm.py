"""`vllm serve ARGS` through vLLM's own argument handling, without a GPU or weights.

In vLLM's own order (vllm/entrypoints/cli/main.py and serve.py): the `vllm` parser with the
serve subcommand ServeSubcommand builds (make_arg_parser), parse_args, the subcommand's
validate, the positional model as --model (ServeSubcommand.cmd), AsyncEngineArgs.from_cli_args
and create_engine_config(UsageContext.OPENAI_API_SERVER, headless) -> VllmConfig: the engine's
own resolution of every setting. Nothing is started: no engine core, no workers, no kernels.

The device: vLLM resolves `current_platform` lazily; a CudaPlatformBase subclass answering the
device queries from GpuFacts is installed before any vLLM module binds it, so the defaults are
those of the node's GPU (batch budgets depend on its memory tier).
"""
import os
import time
import warnings

import check_common

KV_CONNECTOR_MODULES = {  # connector -> the module it imports at start (vLLM's own imports)
    "NixlConnector": ("nixl", "nixl._api"),
    "NixlPullConnector": ("nixl", "nixl._api"),
    "NixlPushConnector": ("nixl", "nixl._api"),
    "MooncakeConnector": ("mooncake-transfer-engine", "mooncake.engine"),
}


class VllmServeChecker:
    kind = "vllm-serve"

    def __init__(self, facts, records):
        self.facts, self.records = facts, records
        started = time.monotonic()
        # Triton stays enabled as on a GPU node when CUDA_VISIBLE_DEVICES is set (even empty):
        # vllm/triton_utils/importing.py otherwise disables it without a Triton driver.
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
        self._install_platform()
        import vllm
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.entrypoints.cli.serve import ServeSubcommand
        from vllm.usage.usage_lib import UsageContext
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:  # vLLM <= 0.11
            from vllm.utils import FlexibleArgumentParser
        self.version = vllm.__version__
        self.AsyncEngineArgs, self.ServeSubcommand = AsyncEngineArgs, ServeSubcommand
        self.UsageContext, self.FlexibleArgumentParser = UsageContext, FlexibleArgumentParser
        self.import_s = time.monotonic() - started

    def _install_platform(self):
        import vllm.platforms as platforms
        from vllm.platforms.cuda import CudaPlatformBase
        from vllm.platforms.interface import DeviceCapability
        facts = self.facts

        class NodeGpuPlatform(CudaPlatformBase):
            @classmethod
            def get_device_capability(cls, device_id=0):
                return DeviceCapability(major=facts.capability[0], minor=facts.capability[1])

            @classmethod
            def get_device_name(cls, device_id=0):
                return facts.name

            @classmethod
            def get_device_uuid(cls, device_id=0):
                return "GPU-servesweep-check-%d" % device_id

            @classmethod
            def get_device_total_memory(cls, device_id=0):
                return facts.memory_bytes

            @classmethod
            def is_fully_connected(cls, physical_device_ids):
                return True

            @classmethod
            def device_count(cls):
                return check_common.visible_gpu_count(facts)

            @classmethod
            def get_device_numa_node(cls, device_id=0):
                return 0

            @classmethod
            def get_all_device_numa_nodes(cls):
                return [0] * facts.count

            @classmethod
            def num_compute_units(cls, device_id=0):
                return 132

        platforms._current_platform = NodeGpuPlatform()

    def _parser(self):
        parser = self.FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
        subparsers = parser.add_subparsers(required=False, dest="subparser")
        command = self.ServeSubcommand()
        serve = command.subparser_init(subparsers)
        serve.set_defaults(dispatch_function=command.cmd)
        return parser, serve, command

    def check(self, args, result):
        parser, serve_parser, command = self._parser()
        result["spellings"] = check_common.option_spelling_notes(serve_parser, args)
        with warnings.catch_warnings(record=True) as python_warnings:
            warnings.simplefilter("always")
            try:
                result["stage"] = "parse"
                namespace = check_common.parse_or_refuse(parser, ["serve"] + list(args))
                result["stage"] = "validate"
                command.validate(namespace)
                if getattr(namespace, "model_tag", None) is not None:  # ServeSubcommand.cmd
                    namespace.model = namespace.model_tag
                result["stage"] = "engine args"
                engine_args = self.AsyncEngineArgs.from_cli_args(namespace)
                result["stage"] = "engine config"
                config = engine_args.create_engine_config(
                    usage_context=self.UsageContext.OPENAI_API_SERVER,
                    headless=bool(getattr(namespace, "headless", False)))
                result["stage"] = "packages"
                result["resolved"], result["effective"] = resolved(config, namespace)
                result["missing_packages"] = self._connector_needs(config)
                result["accepted"] = not result["missing_packages"]
                result["stage"] = "done"
            except BaseException as e:  # noqa: BLE001 - every refusal is the engine's answer
                result["error"] = check_common.refusal_message(e, ["vllm"])
                result["model_unavailable"] = check_common.model_config_unavailable(e)
            finally:
                result["warnings"] = check_common.engine_warnings(
                    self.records.take(), python_warnings, ("vllm",))

    def _connector_needs(self, config):
        kv = config.kv_transfer_config
        if kv is None or not kv.kv_connector:
            return []
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
        registry = getattr(KVConnectorFactory, "_registry", None)
        if registry is not None and kv.kv_connector not in registry:
            raise ValueError("kv_connector '%s' is not a connector of vLLM %s (registered: %s)"
                             % (kv.kv_connector, self.version, ", ".join(sorted(registry))))
        needs = KV_CONNECTOR_MODULES.get(kv.kv_connector)
        if needs is None:
            return []
        ok, why = check_common.module_available(needs[1])
        return [] if ok else ["%s (import %s: %s), which %s needs" % (
            needs[0], needs[1], why, kv.kv_connector)]


def _get(obj, *path):
    for name in path:
        if obj is None:
            return None
        obj = getattr(obj, name, None)
    return obj


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def api_servers(namespace, parallel):
    """The API-server processes `vllm serve` starts: the flag where given; unset, vLLM <= 0.11's
    parser default (1), or later serve.py's own (None: one per DP rank behind its internal load
    balancer, the mode servesweep's head starts; none in headless mode)."""
    count = getattr(namespace, "api_server_count", 1)
    if getattr(namespace, "headless", False):
        return 0
    return count if count is not None else parallel.data_parallel_size


def resolved(config, namespace):
    """The engine's own values (its field names) and the settings a comparison matches on
    (servesweep's names, docs/engines.md#effective-settings)."""
    scheduler, cache = config.scheduler_config, config.cache_config
    parallel, model = config.parallel_config, config.model_config
    spec, kv = config.speculative_config, config.kv_transfer_config
    raw = {
        "max_num_batched_tokens": scheduler.max_num_batched_tokens,
        "max_num_seqs": scheduler.max_num_seqs,
        "enable_chunked_prefill": _get(scheduler, "enable_chunked_prefill"),
        "long_prefill_token_threshold": _get(scheduler, "long_prefill_token_threshold"),
        "max_model_len": model.max_model_len,
        "dtype": str(model.dtype).replace("torch.", ""),
        "quantization": model.quantization,
        "kv_cache_dtype": cache.cache_dtype,
        "enable_prefix_caching": cache.enable_prefix_caching,
        "block_size": cache.block_size,
        "gpu_memory_utilization": cache.gpu_memory_utilization,
        "tensor_parallel_size": parallel.tensor_parallel_size,
        "pipeline_parallel_size": parallel.pipeline_parallel_size,
        "data_parallel_size": parallel.data_parallel_size,
        "data_parallel_size_local": _get(parallel, "data_parallel_size_local"),
        "enable_expert_parallel": _get(parallel, "enable_expert_parallel"),
        "world_size": _get(parallel, "world_size"),
        "nnodes": _get(parallel, "nnodes"),
        "node_rank": _get(parallel, "node_rank"),
        "distributed_executor_backend": _plain(_get(parallel, "distributed_executor_backend")),
        "api_server_count": getattr(namespace, "api_server_count", None),
    }
    if spec is not None:
        raw["speculative.method"] = spec.method
        raw["speculative.num_speculative_tokens"] = spec.num_speculative_tokens
        raw["speculative.model"] = _get(spec, "model")
    if kv is not None:
        raw["kv_transfer.kv_connector"] = kv.kv_connector
        raw["kv_transfer.kv_role"] = kv.kv_role
    raw = {k: _plain(v) for k, v in raw.items()}

    chunked = bool(raw["enable_chunked_prefill"])
    threshold = raw["long_prefill_token_threshold"] or 0
    kv_dtype = raw["kv_cache_dtype"]
    effective = {
        # One step schedules at most max_num_batched_tokens tokens, prefill and decode together.
        "prefill_budget_tok": raw["max_num_batched_tokens"],
        # A long prompt is cut into chunks of the step budget (or the long-prefill threshold).
        "prefill_chunk_tok": (threshold if threshold > 0 else raw["max_num_batched_tokens"])
        if chunked else "off",
        "max_running_requests": raw["max_num_seqs"],
        "context_len_tok": raw["max_model_len"],
        "kv_cache_dtype": raw["dtype"] if kv_dtype == "auto" else
        ("fp8_e4m3" if kv_dtype == "fp8" else kv_dtype),
        "prefix_caching": "on" if raw["enable_prefix_caching"] else "off",
        "spec_method": "none",
        "api_servers": api_servers(namespace, parallel),
    }
    if spec is not None:
        effective["spec_method"] = "mtp" if "mtp" in str(spec.method) else str(spec.method)
        # Draft tokens proposed per step (each verified in the next target step).
        effective["spec_draft_tokens_per_step"] = spec.num_speculative_tokens
    return raw, effective
