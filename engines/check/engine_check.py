#!/usr/bin/env python3
"""servesweep's engine check: command lines handed to the engines' own argument handling in
the Python environment they will run in (this interpreter), without weights or a GPU.

  python engine_check.py --cases CASES.json --out RESULTS.jsonl

CASES.json: {"gpu": {...}, "cases": [{"id": "...", "kind": "vllm-serve", "entry": "vllm serve",
"args": [...], "env": {...}}, ...]}; kinds: vllm-serve, sglang-serve, vllm-router,
sglang-router. RESULTS.jsonl: first a line {"environment": {...}} (the interpreter, the
installed versions, the GPU facts the engines were told), then one line per case:
{"id", "accepted", "stage", "error", "warnings", "spellings", "missing_packages", "resolved",
"effective", "version", "seconds"}. Every case of one kind shares one import of its engine
(the imports are most of the time), so batch the cases.

  python engine_check.py --versions --out FILE        (the environment line alone; imports no
                                                        engine)
  python engine_check.py --options PARSER --out FILE   (vllm-serve, sglang-serve, vllm-router,
                                                         sglang-router: the option strings)
  python engine_check.py --facts MODEL_DIR --out FILE  (all of both below that this
                                                        environment holds, in one JSON)
  python engine_check.py --metrics ENGINE --model DIR --out FILE   (vllm, sglang: the metric
                                         names, their collectors built for the model in DIR)

Written by servesweep (engines/check/); it calls the engines' code, copies none of it.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import check_common  # noqa: E402

DISTRIBUTIONS = ["vllm", "vllm-router", "sglang", "sglang-router", "nixl", "nixl-cu12",
                 "nixl-cu13", "mooncake-transfer-engine", "mooncake-transfer-engine-cuda13",
                 "mooncake-transfer-engine-non-cuda", "torch", "transformers"]


def environment(facts):
    return {"python": sys.executable,
            "versions": {d: v for d in DISTRIBUTIONS if (v := check_common.package_version(d))},
            "gpu": facts.describe() if facts else None}


def make_checker(kind, facts, records):
    if kind == "vllm-serve":
        import check_vllm
        return check_vllm.VllmServeChecker(facts, records)
    if kind == "sglang-serve":
        import check_sglang
        return check_sglang.SglangServeChecker(facts, records)
    if kind in ("vllm-router", "sglang-router"):
        import check_routers
        return check_routers.RouterChecker(kind, records)
    raise ValueError("unknown kind of command line '%s'" % kind)


def run_cases(request, out):
    facts = check_common.gpu_facts(request.get("gpu"))
    out.write(json.dumps({"environment": environment(facts)}) + "\n")
    out.flush()
    records = check_common.LogRecords()
    checkers, failures = {}, {}
    for case in request.get("cases", []):
        started = time.monotonic()
        kind = case.get("kind", "")
        result = {"id": case.get("id"), "kind": kind, "accepted": False, "stage": "import",
                  "error": None, "warnings": [], "spellings": [], "missing_packages": [],
                  "resolved": None, "effective": None, "version": ""}
        if kind not in checkers and kind not in failures:  # in the checker's own environment
            try:
                checkers[kind] = make_checker(kind, facts, records)
                records.take()  # import-time noise is nobody's case
            except BaseException as e:  # noqa: BLE001 - the engine is not installed here
                failures[kind] = "%s cannot be imported by %s: %s" % (
                    kind, sys.executable, check_common.refusal_message(e, []))
        with check_common.CaseEnvironment(case.get("env")):
            if kind in failures:
                result["error"] = failures[kind]
                result["not_installed"] = True
            else:
                checker = checkers[kind]
                result["version"] = checker.version
                if kind == "sglang-serve":
                    checker.check(case.get("args", []), result, case.get("entry", "sglang serve"))
                else:
                    checker.check(case.get("args", []), result)
        result["seconds"] = round(time.monotonic() - started, 3)
        out.write(json.dumps(result, default=str) + "\n")
        out.flush()


def load_driver_or_stub():
    """The engines' KV libraries (nixl, mooncake) link libcuda.so.1. Where no driver is
    installed (CI, a laptop) the environment may hold a stand-in built from the symbols they
    reference, every call answering "no device" (scripts/install-engines.sh makes it); the
    dynamic loader reads LD_LIBRARY_PATH only when a process starts, hence the re-exec."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        return
    except OSError:
        pass
    stub = os.path.join(sys.prefix, "lib", "servesweep-cuda-stub")
    paths = os.environ.get("LD_LIBRARY_PATH", "")
    if os.path.isfile(os.path.join(stub, "libcuda.so.1")) and stub not in paths.split(":"):
        os.environ["LD_LIBRARY_PATH"] = stub + (":" + paths if paths else "")
        os.execv(sys.executable, [sys.executable] + sys.argv)


def main(argv):
    if argv[:1] == ["--versions"]:
        argv = argv[1:] + ["--versions", "yes"]
    options = dict(zip(argv[0::2], argv[1::2]))
    if len(argv) % 2 or "--out" not in options:
        sys.stderr.write(__doc__)
        return 2
    # The engines print to stdout; the results go to their own file.
    with open(options["--out"], "w") as out:
        check_common.quiet_stdout()
        if "--versions" in options:
            out.write(json.dumps({"environment": environment(None)}) + "\n")
        elif "--cases" in options:
            with open(options["--cases"]) as f:
                run_cases(json.load(f), out)
        elif "--facts" in options:
            import engine_facts
            json.dump(engine_facts.all_facts(options["--facts"]), out)  # one line
        elif "--options" in options:
            import engine_facts
            json.dump(engine_facts.option_table(options["--options"]), out, indent=1)
        elif "--metrics" in options:
            import engine_facts
            json.dump(engine_facts.metric_names(options["--metrics"], options.get("--model", "")),
                      out, indent=1)
        else:
            sys.stderr.write(__doc__)
            return 2
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--versions"]:
        load_driver_or_stub()
    sys.stdout.flush()
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Engines leave threads behind (tokenizers, torch); their shutdown is not ours to wait for.
    os._exit(code)
