"""Headless Chromium for the picture checks: installed from Debian when missing."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from timestone.viz.browser import find_chromium


@pytest.fixture(scope="session")
def chromium() -> str:
    """The browser's path; installs Debian's ``chromium`` (as root) when it is missing."""
    found = find_chromium()
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env, timeout=900
        )
        found = find_chromium()
    assert found is not None, "the picture checks need Chromium: apt-get install chromium"
    return found
