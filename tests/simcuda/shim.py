"""Build and load the C++ shim (shim.cpp) that gives a CPU-only PyTorch a CUDA device guard
and CUDA hooks. It must load before ``import torch``: torch reads its CUDA hooks once, and a
process that imported torch first keeps the CPU wheel's "not built" for good. Nothing here
imports torch; the build is cached by the source's and torch's hashes."""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("shim.cpp")


def torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the simulated-CUDA tier needs PyTorch installed")
    return Path(next(iter(spec.submodule_search_locations)))


def build_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nmt" / "simcuda"
    return Path(os.environ.get("NMT_SIMCUDA_BUILD", default))


def build() -> Path:
    """The shim's shared library, compiled with g++ against this torch's headers (~30 s, once)."""
    torch = torch_dir()
    key = hashlib.sha256(SOURCE.read_bytes() + importlib.metadata.version("torch").encode()).hexdigest()[:16]
    library = build_dir() / f"simcuda-{key}.so"
    if library.exists():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    partial = library.with_suffix(f".{os.getpid()}.tmp")
    command = [
        os.environ.get("CXX", "g++"), "-shared", "-fPIC", "-std=c++17", "-O1", "-w",
        "-D_GLIBCXX_USE_CXX11_ABI=1",  # the ABI of PyTorch's wheels since 2.7
        f"-I{torch / 'include'}", str(SOURCE), f"-L{torch / 'lib'}", "-lc10", "-ltorch_cpu",
        f"-Wl,-rpath,{torch / 'lib'}", "-o", str(partial),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"the simulated-CUDA shim did not compile:\n{' '.join(command)}\n{result.stderr[-4000:]}")
    partial.replace(library)  # atomic: a second process building at once finds a whole file
    return library


def load() -> None:
    """Load torch's libraries, then the shim, into this process, before torch's Python module."""
    if "torch" in sys.modules:
        raise RuntimeError("the simulated-CUDA shim must load before `import torch` (torch reads its hooks once)")
    library = build()
    lib = torch_dir() / "lib"
    for name in ("libc10.so", "libtorch_cpu.so"):
        ctypes.CDLL(str(lib / name), mode=ctypes.RTLD_GLOBAL)
    shim = ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    if shim.nmt_simulated_cuda_loaded() != 1:
        raise RuntimeError("the simulated-CUDA shim loaded but does not answer")
