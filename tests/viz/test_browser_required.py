"""The picture checks never install a browser: without one they fail, naming `make browser`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
PICTURE_TEST = "tests/viz/test_timeline_page.py::test_the_timeline_renders_with_bars_at_their_dates"


def test_a_missing_browser_fails_the_picture_test_without_installing_one(tmp_path: Path) -> None:
    # a PATH with no browser on it, and a package manager that records being called
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "apt-get-called"
    for manager in ("apt-get", "sudo"):
        fake = bin_dir / manager
        fake.write_text(f'#!/bin/sh\necho "$0 $*" >> {called}\nexit 0\n')
        fake.chmod(0o755)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TIMESTONE_", "OPENAI_", "PYTEST"))
    }
    env["PATH"] = str(bin_dir)
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            f"--basetemp={tmp_path / 'run'}",
            PICTURE_TEST,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert not called.exists(), f"the tests ran a package manager: {called.read_text()}"
    assert proc.returncode == 1, out  # failed, not skipped (pytest exits 0 on a skip)
    assert "1 error" in out, out
    assert "need a headless Chromium and none is installed: run `make browser`" in out, out
