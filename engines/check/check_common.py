"""What every engine check shares: a stand-in GPU, the engine's log records, the
environment of one case, and the engine's own message for a refusal.

No GPU is touched: the engines ask a few device questions (name, memory, compute
capability, count) while they pick their defaults, and those answers come from
GpuFacts -- the node's nvidia-smi where there is one, else the facts given.
"""
import argparse
import contextlib
import io
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback

# Facts of GPUs servesweep runs on, for checks made off the node (plan --check-engines on a
# laptop or in CI). "memory_gib" is what the driver reports (nvidia-smi memory.total).
GPU_PRESETS = {
    "h100": ("NVIDIA H100 80GB HBM3", 79.6, (9, 0)),
    "h200": ("NVIDIA H200", 139.8, (9, 0)),
    "b200": ("NVIDIA B200", 178.4, (10, 0)),
    "a100": ("NVIDIA A100-SXM4-80GB", 79.2, (8, 0)),
    "l4": ("NVIDIA L4", 22.0, (8, 9)),
}


class GpuFacts:
    def __init__(self, name, memory_gib, capability, count, source):
        self.name, self.memory_gib, self.capability = name, memory_gib, capability
        self.count, self.source = count, source

    @property
    def memory_bytes(self):
        return int(self.memory_gib * (1 << 30))

    def describe(self):
        return "%d x %s (%.0f GiB, cc %d.%d; %s)" % (
            self.count, self.name, self.memory_gib, self.capability[0], self.capability[1],
            self.source)


def _query_nvidia_smi():
    """The node's GPUs from nvidia-smi (a query, no CUDA context), or None."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,compute_cap",
             "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [r.split(",") for r in out.stdout.strip().splitlines() if r.count(",") == 2]
    if out.returncode != 0 or not rows:
        return None
    name, mem_mib, cc = (x.strip() for x in rows[0])
    try:
        major, minor = (int(x) for x in cc.split("."))
        return GpuFacts(name, float(mem_mib) / 1024, (major, minor), len(rows), "nvidia-smi")
    except ValueError:
        return None


def gpu_facts(spec):
    """spec: {"preset": "h200", "count": 8} or {"name", "memory_gib", "capability", "count"},
    optionally {"prefer_node": true} to use the node's nvidia-smi when it answers."""
    spec = spec or {}
    if spec.get("prefer_node"):
        node = _query_nvidia_smi()
        if node is not None:
            return node
    count = int(spec.get("count") or 8)
    preset = spec.get("preset")
    if preset:
        if preset not in GPU_PRESETS:
            raise ValueError("unknown GPU preset '%s' (known: %s)" % (
                preset, ", ".join(sorted(GPU_PRESETS))))
        name, mem, cc = GPU_PRESETS[preset]
        return GpuFacts(name, mem, cc, count, "preset " + preset)
    if spec.get("name"):
        major, minor = (int(x) for x in str(spec.get("capability", "9.0")).split("."))
        return GpuFacts(spec["name"], float(spec.get("memory_gib", 80)), (major, minor), count,
                        "given")
    name, mem, cc = GPU_PRESETS["h100"]
    return GpuFacts(name, mem, cc, count, "default preset h100")


def visible_gpu_count(facts):
    """GPUs a process sees: its CUDA_VISIBLE_DEVICES when set and not empty."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return len([d for d in visible.split(",") if d.strip()]) if visible.strip() else facts.count


def write_fake_nvidia_smi(facts):
    """A folder holding an `nvidia-smi` that answers --query-gpu with `facts` (SGLang reads
    the memory tier from nvidia-smi); prepend it to PATH."""
    folder = tempfile.mkdtemp(prefix="servesweep-check-nvsmi-")
    path = os.path.join(folder, "nvidia-smi")
    with open(path, "w") as f:
        f.write("""#!/bin/sh
# Stand-in nvidia-smi of servesweep's engine check: answers --query-gpu=FIELD.
q=""; for a in "$@"; do case "$a" in --query-gpu=*) q="${a#--query-gpu=}";; esac; done
n=${CUDA_VISIBLE_DEVICES:-}
if [ -n "$n" ]; then count=$(echo "$n" | tr ',' '\\n' | grep -c .); else count=%d; fi
i=0; while [ $i -lt $count ]; do
  case "$q" in
    memory.total) echo "%d";; compute_cap) echo "%d.%d";; name) echo "%s";;
    count) echo "$count";; *) exit 1;;
  esac; i=$((i+1)); done
""" % (facts.count, facts.memory_bytes >> 20, facts.capability[0], facts.capability[1],
       facts.name))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return folder


class LogRecords(logging.Handler):
    """Every log record of the process. Engines replace their loggers' handlers (vLLM runs
    dictConfig inside create_engine_config), so records are taken where loggers call their
    handlers, not from a handler of ours."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []
        original = logging.Logger.callHandlers
        owner = self

        def call_handlers(logger, record, _original=original):
            owner.handle(record)
            return _original(logger, record)
        logging.Logger.callHandlers = call_handlers

    def emit(self, record):
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is the engine's
            message = str(record.msg)
        self.records.append((record.levelno, record.name, strip_ansi(message)))

    def take(self):
        records, self.records = self.records, []
        return records


def strip_ansi(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def engine_warnings(records, python_warnings, engine_prefixes):
    """The engine's own warnings, deduplicated, in order: log records of its loggers at
    WARNING or above and Python warnings raised from its package."""
    out, seen = [], set()
    for level, name, message in records:
        if level >= logging.WARNING and name.split(".")[0] in engine_prefixes:
            if message not in seen:
                seen.add(message)
                out.append(message)
    for w in python_warnings:
        filename = getattr(w, "filename", "") or ""
        # Deprecations raised in the engine's files are of the libraries it calls (torch,
        # cutlass); the engine's own deprecations of its flags come as log records.
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning)):
            continue
        if any("/%s/" % p in filename for p in engine_prefixes):
            message = strip_ansi(str(w.message))
            if message not in seen:
                seen.add(message)
                out.append(message)
    return out


class CaseEnvironment:
    """os.environ for one case: the process's own variables on top of the checker's, restored
    afterwards (engines write os.environ while they resolve, which must not leak into the
    next case)."""

    def __init__(self, env):
        self.env = env or {}

    def __enter__(self):
        self.saved = dict(os.environ)
        os.environ.update(self.env)
        return self

    def __exit__(self, *exc):
        os.environ.clear()
        os.environ.update(self.saved)
        return False


def refusal_message(error, packages):
    """The engine's message for an exception; where it has none (a bare assert), the
    exception type and the engine's frame that raised it. `packages`: the engine's package
    names (their frames are the engine's own)."""
    message = strip_ansi(str(error)).strip()
    roots = []
    for name in packages:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            roots.append(os.path.dirname(os.path.abspath(module.__file__)))
    where = ""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        root = next((r for r in roots if frame.filename.startswith(r + os.sep)), None)
        if root is not None:
            relative = os.path.relpath(frame.filename, os.path.dirname(root))
            where = "%s (%s:%d)" % (frame.name, relative, frame.lineno)
            break
    kind = type(error).__name__
    if message:
        return "%s: %s" % (kind, message) + (" [in %s]" % where if where else "")
    if frames:
        code = frames[-1].line or ""
        return "%s in %s%s" % (kind, where or frames[-1].name,
                               (": " + code) if code else "")
    return kind


# Exceptions of the model hub and of loading a model's files: the check could not read the
# model's config there (no network, no weights, a gated repository), which says nothing of the
# command line. Matched by class name so that no hub library needs to import here.
_MODEL_LOAD_ERRORS = ("LocalEntryNotFoundError", "EntryNotFoundError", "RepositoryNotFoundError",
                      "GatedRepoError", "RevisionNotFoundError", "OfflineModeIsEnabled",
                      "HfHubHTTPError", "ConnectionError", "ConnectTimeout", "ProxyError")
# Only the model's own files: a missing file a flag names (a chat template) stays a refusal.
_MODEL_LOAD_WORDS = ("huggingface.co", "couldn't connect to", "does not appear to have a file",
                     "is not a local folder and is not a valid model identifier",
                     "can't load the configuration")


def model_config_unavailable(error):
    """Whether `error` (or an exception it was raised from) is a failure to load the model's
    files rather than the engine refusing the command line."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        names = [c.__name__ for c in type(error).__mro__]
        if any(n in _MODEL_LOAD_ERRORS for n in names):
            return True
        text = str(error).lower()
        if isinstance(error, OSError) and any(w in text for w in _MODEL_LOAD_WORDS):
            return True
        error = error.__cause__ or error.__context__
    return False


_AVAILABLE = {}


def module_available(module):
    """Whether `module` imports in the engine's environment (this interpreter with the case's
    variables: PYTHONPATH, LD_LIBRARY_PATH), and why not. The KV transfer libraries (nixl,
    mooncake) are not dependencies of the engine wheels, and they link libcuda. Imported in a
    child, so the check itself neither keeps nor depends on them."""
    key = (module, tuple(sorted(os.environ.items())))
    if key not in _AVAILABLE:
        try:
            child = subprocess.run([sys.executable, "-c", "import " + module],
                                   capture_output=True, text=True, timeout=120)
            lines = [line for line in child.stderr.strip().splitlines() if line.strip()]
            _AVAILABLE[key] = (child.returncode == 0, lines[-1] if lines else
                               "exit %d" % child.returncode)
        except (OSError, subprocess.SubprocessError) as e:
            _AVAILABLE[key] = (False, str(e))
    ok, why = _AVAILABLE[key]
    return ok, "" if ok else why


def package_version(distribution):
    try:
        from importlib import metadata
        return metadata.version(distribution)
    except Exception:  # noqa: BLE001 - not installed
        return ""


def quiet_stdout():
    """Engines print to stdout (vLLM logs there); the checker's output goes to its own file,
    so point fd 1 at stderr."""
    sys.stdout.flush()
    os.dup2(2, 1)


def parse_or_refuse(parser, argv):
    """argparse exits on a bad command line; its message is the refusal."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parser.parse_args(argv)
    except SystemExit as e:
        lines = [line for line in errors.getvalue().strip().splitlines() if line.strip()]
        raise ValueError(lines[-1] if lines else "argparse exit %s" % e.code) from None


def option_spelling_notes(parser, argv):
    """Option strings of `argv` the parser accepts but does not list: hidden aliases (vLLM
    0.33's --no-enable-prefix-caching beside --disable-prefix-caching), abbreviations
    (allow_abbrev), suppressed and deprecated options."""
    notes = []
    actions = getattr(parser, "_option_string_actions", {})
    for token in argv:
        if not token.startswith("--"):
            continue
        flag = token.split("=", 1)[0]
        action = actions.get(flag) or actions.get(flag.replace("_", "-"))
        if action is None:
            matches = [s for s in actions if s.startswith(flag)]
            if len(matches) == 1 and getattr(parser, "allow_abbrev", False):
                notes.append("%s is an abbreviation of %s" % (flag, matches[0]))
            continue
        if flag not in action.option_strings and flag.replace("_", "-") not in action.option_strings:
            notes.append("%s is a hidden alias of %s" % (flag, "/".join(action.option_strings)))
        if action.help == argparse.SUPPRESS:
            notes.append("%s is hidden (help suppressed)" % flag)
        if (type(action).__name__.startswith("Deprecated") or getattr(action, "deprecated", False)
                or action in getattr(parser, "_deprecated", ())):
            notes.append("%s is deprecated" % flag)
    return notes
