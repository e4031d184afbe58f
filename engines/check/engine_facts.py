"""What the installed engines define, for servesweep's tables to be checked against:
the option strings of each parser (the flag tables), the Prometheus metric names of each
engine (the /metrics mapping tables), and the routes that reset their prefix caches.
"""
import argparse
import ast
import importlib.util
import os

import check_common


def _parser(name):
    """The parser the engine builds for its command line, and the engine's version."""
    if name == "vllm-serve":
        import check_vllm
        checker = check_vllm.VllmServeChecker(check_common.gpu_facts({}), None)
        _, serve, _ = checker._parser()
        return serve, checker.version
    if name == "sglang-serve":
        import check_sglang
        checker = check_sglang.SglangServeChecker(check_common.gpu_facts({}), None)
        parser = argparse.ArgumentParser(prog="sglang serve")
        checker.ServerArgs.add_cli_args(parser)
        return parser, checker.version
    if name in ("vllm-router", "sglang-router"):
        import check_routers
        checker = check_routers.RouterChecker(name, None)
        parser = argparse.ArgumentParser(prog=name)
        checker.router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False)
        return parser, checker.version
    raise ValueError("unknown parser '%s'" % name)


def option_table(name):
    """Every option string the parser accepts: listed ones, hidden aliases (registered but not
    in the action's option_strings), and which are deprecated or suppressed, and why."""
    parser, version = _parser(name)
    deprecated_set = set(getattr(parser, "_deprecated", ()) or ())
    options = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        why = []
        if action in deprecated_set or getattr(action, "deprecated", False):
            why.append("marked deprecated")
        if type(action).__name__.startswith("Deprecated"):
            why.append(type(action).__name__)
        text = action.help if isinstance(action.help, str) else ""
        if text.lstrip("([ ").lower().startswith("deprecated"):
            why.append("help: " + text[:120])
        hidden_aliases = [s for s, a in parser._option_string_actions.items()
                          if a is action and s not in action.option_strings]
        options.append({"option_strings": list(action.option_strings),
                        "hidden_aliases": hidden_aliases,
                        "suppressed": action.help == argparse.SUPPRESS,
                        "deprecated": why,
                        "takes_value": action.nargs != 0})
    return {"parser": name, "version": version, "allow_abbrev": parser.allow_abbrev,
            "options": options}


def _static_names(package_dir, prefix):
    """Metric names given as name="<prefix>..." in the package's sources (connectors and
    optional collectors the runtime registry does not hold for one configuration)."""
    names = set()
    for root, _, files in os.walk(package_dir):
        for file in files:
            if not file.endswith(".py"):
                continue
            try:
                with open(os.path.join(root, file), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError, OSError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    for keyword in node.keywords:
                        value = keyword.value
                        if (keyword.arg == "name" and isinstance(value, ast.Constant)
                                and isinstance(value.value, str)
                                and value.value.startswith(prefix)):
                            names.add(value.value)
    return names


def _exposed(registry, prefix):
    """Sample name -> its family's type, as /metrics exposes them (counters with _total,
    histograms with _bucket, _sum, _count). A family with no sample yet (labelled, none seen)
    is listed under its name as well."""
    out = {}
    for family in registry.collect():
        if not family.name.startswith(prefix):
            continue
        for sample in family.samples:
            out[sample.name] = family.type
        if not family.samples:
            out[family.name + ("_total" if family.type == "counter" else "")] = family.type
    return out


def metric_names(engine, model, declared=True):
    """The metric names an engine registers: its collectors instantiated for `model` (a folder
    holding its config.json) as the server does, with speculative decoding on (its metrics are
    registered only then), read back from the registry as /metrics exposes them; and the names
    its sources declare (connectors, optional collectors; `declared`: the slow part)."""
    import prometheus_client
    if engine == "vllm":
        import check_vllm
        checker = check_vllm.VllmServeChecker(check_common.gpu_facts({}), None)
        from vllm.v1.metrics.loggers import PrometheusStatLogger
        import vllm
        parser, _, _ = checker._parser()
        args = parser.parse_args(["serve", model, "--speculative-config",
                                  '{"method": "ngram", "num_speculative_tokens": 2, '
                                  '"prompt_lookup_max": 4}'])
        args.model = args.model_tag
        config = checker.AsyncEngineArgs.from_cli_args(args).create_engine_config(
            usage_context=checker.UsageContext.OPENAI_API_SERVER)
        PrometheusStatLogger(config, engine_indexes=[0])
        exposed = _exposed(prometheus_client.REGISTRY, "vllm:")
        return {"engine": "vllm", "version": checker.version, "exposed": exposed,
                "declared": sorted(_static_names(os.path.dirname(vllm.__file__), "vllm:"))
                if declared else []}
    if engine == "sglang":
        import check_sglang
        checker = check_sglang.SglangServeChecker(check_common.gpu_facts({}), None)
        import sglang
        import sglang.srt.observability.metrics_collector as collectors
        from sglang.srt.runtime_context import SpawnRanks, publish
        server_args = checker.prepare_server_args(["--model-path", model, "--enable-metrics"])
        server_args.resolve_once()
        labels = {"model_name": "m"}
        exposed = {}

        def collect_and_clear():
            # One process per role in a server: collect, then unregister before the next.
            registry = prometheus_client.REGISTRY
            exposed.update(_exposed(registry, "sglang:"))
            for collector in list(registry._collector_to_names):
                if any(n.startswith("sglang:") for n in registry._collector_to_names[collector]):
                    registry.unregister(collector)

        publish(server_args, role="tokenizer")
        collectors.TokenizerMetricsCollector(server_args=server_args, labels=labels)
        collect_and_clear()
        publish(server_args, role="scheduler", ranks=SpawnRanks(world_rank=0, gpu_id=0))
        collectors.SchedulerMetricsCollector.init_new(
            server_args=server_args, enable_priority_scheduling=False, enable_lora=False,
            enable_hierarchical_cache=False)
        collect_and_clear()
        return {"engine": "sglang", "version": checker.version, "exposed": exposed,
                "declared": sorted(_static_names(os.path.dirname(sglang.__file__), "sglang:"))
                if declared else []}
    raise ValueError("unknown engine '%s'" % engine)


# The prefix-cache reset each engine's server defines, which a kept engine is reset with between
# runs (docs/engines.md#cache-reset).
CACHE_RESET_PATHS = {"vllm": "/reset_prefix_cache", "sglang": "/flush_cache"}
_ROUTE_DECORATORS = {"get": ["GET"], "post": ["POST"], "put": ["PUT"], "delete": ["DELETE"]}


def _parents(tree):
    parent = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
    return parent


def _gates(node, parent):
    """The tests of the `if` statements enclosing node, innermost first, as source text."""
    out = []
    while node in parent:
        node = parent[node]
        if isinstance(node, ast.If):
            out.append(ast.unparse(node.test))
    return out


def _routers(tree):
    """Module-level names bound to an APIRouter(...)."""
    out = set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and ast.unparse(node.value.func).endswith("APIRouter")):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def _package_sources(package_dir):
    """Module name -> (source text, is a package's __init__), tests and benchmarks aside."""
    out = {}
    top = os.path.dirname(package_dir)
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = [d for d in dirs if d not in ("tests", "test", "benchmarks", "__pycache__")]
        for file in files:
            if not file.endswith(".py"):
                continue
            path = os.path.join(root, file)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (UnicodeDecodeError, OSError):
                continue
            module = os.path.relpath(path, top)[:-3].replace(os.sep, ".")
            out[module.removesuffix(".__init__")] = (text, file == "__init__.py")
    return out


def _parsed(sources, needle):
    """(module, tree, is_package) of the sources whose text holds needle (parsing every file
    of a package this size takes minutes; the text test takes a second)."""
    for module, (text, is_package) in sources.items():
        if needle in text:
            try:
                yield module, ast.parse(text), is_package
            except SyntaxError:
                continue


def route_facts(package_dir, route):
    """Where the package's server defines `route`: its HTTP methods, and the conditions it is
    registered under: the `if` tests around its handler, or, for a handler on an APIRouter whose
    module is imported by a function (a router attached on demand), the `if` tests around each
    call of that function."""
    sources = _package_sources(package_dir)
    found = []
    for module, tree, _ in _parsed(sources, '"%s"' % route):
        parent = _parents(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for deco in node.decorator_list:
                if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)
                        and deco.args and isinstance(deco.args[0], ast.Constant)
                        and deco.args[0].value == route):
                    continue
                kind = deco.func.attr
                methods = _ROUTE_DECORATORS.get(kind, [])
                if kind == "api_route":
                    for keyword in deco.keywords:
                        if keyword.arg == "methods":
                            methods = sorted(ast.literal_eval(keyword.value))
                owner = deco.func.value.id if isinstance(deco.func.value, ast.Name) else ""
                found.append({"module": module, "methods": methods,
                              "gates": _gates(node, parent), "handler": node.name,
                              "on_router": owner in _routers(tree)})
    for fact in found:
        if fact["gates"] or not fact["on_router"]:
            continue
        attachers = set()
        tail = ".".join(fact["module"].split(".")[-2:])
        for module, tree, is_package in _parsed(sources, tail):
            base = module if is_package else module.rpartition(".")[0]
            for node in ast.walk(tree):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom):
                        target = inner.module or ""
                        if inner.level:
                            parts = base.split(".")
                            up = parts[:len(parts) - inner.level + 1]
                            target = ".".join(up + ([target] if target else []))
                        if target == fact["module"]:
                            attachers.add(node.name)
        gates = []
        for name in sorted(attachers):
            for module, tree, _ in _parsed(sources, name + "("):
                parent = _parents(tree)
                for node in ast.walk(tree):
                    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                            and node.func.id == name):
                        gates.append({"call": name, "module": module,
                                      "gates": _gates(node, parent)})
        fact["attached_by"] = gates
    return {"package": os.path.basename(package_dir), "route": route, "definitions": found}


def cache_reset_routes():
    """The cache reset route of every engine installed here (route_facts), with its version."""
    out = {}
    for engine, route in CACHE_RESET_PATHS.items():
        version = check_common.package_version(engine)
        if not version:
            continue
        spec = importlib.util.find_spec(engine)
        facts = route_facts(os.path.dirname(spec.origin), route)
        facts["version"] = version
        out[engine] = facts
    return out


def all_facts(model):
    """Every parser and engine of this environment: {"options": {parser: option_table},
    "metrics": {engine: metric_names}} (one import of each engine; no source scan)."""
    have = {d: check_common.package_version(d) for d in
            ("vllm", "vllm-router", "sglang", "sglang-router")}
    out = {"options": {}, "metrics": {}}
    for parser, distribution in (("vllm-serve", "vllm"), ("vllm-router", "vllm-router"),
                                 ("sglang-serve", "sglang"), ("sglang-router", "sglang-router")):
        if have[distribution]:
            out["options"][parser] = option_table(parser)
    for engine in ("vllm", "sglang"):
        if have[engine]:
            out["metrics"][engine] = metric_names(engine, model, declared=False)
    out["cache_reset"] = cache_reset_routes()
    return out
