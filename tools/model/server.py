"""The local model server: ``python -m llama_cpp.server`` of the build, on loopback.

``Server`` starts the server of a finished build (``tools.model.build``) with the
packaged model on a free port of 127.0.0.1, waits until it answers, and stops it (its
own process, by the id it was given) when the ``with`` block ends, whatever happened in
it. The server's output goes to ``server.log`` in the build's folder.

    with Server(ensure_built()) as server:
        server.base_url   # http://127.0.0.1:PORT/v1
        server.model      # the name the server answers to
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from tools.model.build import Build

MODEL_ALIAS = "smollm2-135m-instruct"
# The extraction prompt with its schema is about 1,500 tokens; answers are short.
CONTEXT_TOKENS = 4096
START_TIMEOUT = 120.0
# One thread: llama.cpp's threads wait for each other at every step, so on a machine whose
# cores are busy with other work two threads ran 10 to 20 times slower than one (1 to 2
# against 22 to 25 tokens per second for SmolLM2-135M); a 135M model needs no more.
THREADS = 1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``python -m llama_cpp.server`` with the build's model, on a free loopback port."""

    def __init__(self, build: Build, *, threads: int = THREADS) -> None:
        self.build = build
        self.threads = threads
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = build.home / "server.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return MODEL_ALIAS

    def start(self) -> Server:
        self.port = free_port()
        command = [
            str(self.build.python), "-m", "llama_cpp.server",
            "--model", str(self.build.model), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(CONTEXT_TOKENS), "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
        ]  # fmt: skip
        with Path(self.log).open("ab") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
                raise RuntimeError(
                    f"model server: exited with status {self.process.returncode} while "
                    f"starting; last lines of {self.log}:\n{tail}"
                )
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(
            f"model server: no answer on {self.base_url} within {START_TIMEOUT:.0f} s "
            f"(see {self.log})"
        )

    def stop(self) -> None:
        """Stop the server's own process: SIGTERM, then SIGKILL after 10 s."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
