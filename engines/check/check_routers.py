"""The routers in front of disaggregated layouts (vllm-router, sglang-router), through their own
argument handling: launch_router.parse_router_args (argparse + RouterArgs.add_cli_args +
RouterArgs.from_cli_args), RouterArgs._validate_router_args and Router.from_args, which builds
the Rust router from the arguments (and validates them) but is never started: nothing listens.
"""
import time
import warnings

import check_common

PACKAGES = {"vllm-router": ("vllm_router", "vllm-router"),
            "sglang-router": ("sglang_router", "sglang-router")}


class RouterChecker:
    def __init__(self, kind, records):
        self.kind, self.records = kind, records
        started = time.monotonic()
        package, distribution = PACKAGES[kind]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.launch = __import__(package + ".launch_router", fromlist=["launch_router"])
            self.router_args = __import__(package + ".router_args", fromlist=["router_args"])
        self.package = package
        self.version = check_common.package_version(distribution)
        self.import_s = time.monotonic() - started

    def check(self, args, result):
        import argparse
        parser = argparse.ArgumentParser(prog=self.kind)
        self.router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False)
        result["spellings"] = check_common.option_spelling_notes(parser, args)
        with warnings.catch_warnings(record=True) as python_warnings:
            warnings.simplefilter("always")
            try:
                result["stage"] = "parse"
                check_common.parse_or_refuse(parser, list(args))  # argparse's own message
                router_args = self.launch.parse_router_args(list(args))
                values = dict(vars(router_args))  # before from_args, which converts fields
                result["stage"] = "validate"
                if not getattr(router_args, "mini_lb", False):
                    router_args._validate_router_args()
                    router = getattr(self.launch, "Router", None)
                    if router is None:
                        raise RuntimeError("the Rust router of %s is not installed" % self.kind)
                    result["stage"] = "construct"
                    router.from_args(router_args)  # never started
                result["resolved"] = {
                    k: str(values.get(k)) for k in ("host", "port", "prometheus_host",
                                               "prometheus_port", "kv_connector", "policy")
                    if k in values}
                result["resolved"]["prefill_urls"] = [list(p) for p in
                                                      values.get("prefill_urls") or []]
                result["resolved"]["decode_urls"] = list(values.get("decode_urls") or [])
                result["accepted"] = True
                result["stage"] = "done"
            except BaseException as e:  # noqa: BLE001 - every refusal is the router's answer
                result["error"] = check_common.refusal_message(e, [self.package])
            finally:
                result["warnings"] = check_common.engine_warnings(
                    self.records.take(), python_warnings, (self.package, "root"))
