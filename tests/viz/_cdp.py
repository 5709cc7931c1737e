"""Drive a headless Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
commands on its fd 3, answers on its fd 4, each a JSON text ended by a NUL byte)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from typing import Any

from timestone.viz.browser import find_chromium


class Page:
    """One page of a headless Chromium; ``evaluate`` runs JavaScript in it."""

    def __init__(self, url: str) -> None:
        browser = find_chromium()
        assert browser is not None, "run `make browser`"
        self._profile = tempfile.TemporaryDirectory(prefix="timestone-cdp-")
        to_browser, self._commands = os.pipe()
        self._answers, from_browser = os.pipe()

        def wire() -> None:  # in the child, before exec: its fd 3 reads, its fd 4 writes
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self._proc = subprocess.Popen(
            [
                *(browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"),
                "--disable-background-networking",
                f"--user-data-dir={self._profile.name}",
                "--remote-debugging-pipe",
                url,
            ],
            preexec_fn=wire,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._next = 0
        self._buffer = b""
        targets = self._call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        attached = self._call("Target.attachToTarget", targetId=page["targetId"], flatten=True)
        self._session: str = attached["sessionId"]

    def _call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._answers, 1 << 16)
                assert chunk, "Chromium closed its pipe"
                self._buffer += chunk
            raw, _, self._buffer = self._buffer.partition(b"\0")
            answer: dict[str, Any] = json.loads(raw)
            if answer.get("id") == self._next:
                assert "error" not in answer, answer["error"]
                return answer["result"]

    def evaluate(self, expression: str) -> Any:
        result = self._call(
            "Runtime.evaluate",
            session=self._session,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        """The value of ``expression`` once it is truthy."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"never true in the page: {expression}")

    def close(self) -> None:
        with contextlib.suppress(AssertionError):
            self._call("Browser.close")
        self._proc.wait(timeout=60)
        os.close(self._commands)
        os.close(self._answers)
        self._profile.cleanup()
