#!/usr/bin/env python3
"""Builds a stand-in libcuda.so.1 for an engine environment on a machine without an NVIDIA
driver (CI, a laptop): every CUDA driver function the environment's shared libraries reference
(nixl's and mooncake's link libcuda.so.1, so they cannot even be imported without one) returns
CUDA_ERROR_NO_DEVICE. Nothing runs on it; it lets the engine check import what the engine
imports. Written to <venv>/lib/servesweep-cuda-stub/libcuda.so.1, where engine_check.py looks.

  <venv>/bin/python make_cuda_stub.py        (needs nm and cc: binutils, gcc)
"""
import os
import re
import subprocess
import sys
import sysconfig
import tempfile

CUDA_ERROR_NO_DEVICE = 100


def libraries_needing_libcuda(root):
    for folder, _, files in os.walk(root):
        for name in files:
            if ".so" not in name:
                continue
            path = os.path.join(folder, name)
            try:
                dynamic = subprocess.run(["readelf", "-d", path], capture_output=True,
                                         text=True, timeout=30).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            if "[libcuda.so.1]" in dynamic:
                yield path


def driver_symbols(libraries):
    symbols = set()
    for library in libraries:
        out = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True,
                             text=True, timeout=60).stdout
        for line in out.splitlines():
            name = line.split()[-1].split("@")[0] if line.split() else ""
            if re.fullmatch(r"cu[A-Z]\w*", name):  # the driver API (cuInit, cuMemAlloc_v2, ...)
                symbols.add(name)
    return sorted(symbols)


def main():
    site = sysconfig.get_paths()["purelib"]
    target = os.path.join(sys.prefix, "lib", "servesweep-cuda-stub")
    libraries = sorted(libraries_needing_libcuda(site))
    symbols = driver_symbols(libraries)
    os.makedirs(target, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(work, "libcuda_stub.c")
        with open(source, "w") as f:
            f.write("/* servesweep's stand-in libcuda.so.1: no device. */\n")
            for name in symbols:
                f.write("int %s(void) { return %d; }\n" % (name, CUDA_ERROR_NO_DEVICE))
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o",
                        os.path.join(target, "libcuda.so.1"), source], check=True)
    print("make_cuda_stub: %d driver symbols of %d libraries -> %s/libcuda.so.1" % (
        len(symbols), len(libraries), target))


if __name__ == "__main__":
    main()
