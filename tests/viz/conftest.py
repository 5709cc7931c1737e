"""Headless Chromium for the picture checks. The tests never install it: `make browser`
does (CI runs it), and a test that needs it fails, saying so, when it is missing."""

from __future__ import annotations

import pytest

from timestone.viz.browser import find_chromium


@pytest.fixture(scope="session")
def chromium() -> str:
    """The browser's path; fails the test (it is not skipped) when none is installed."""
    found = find_chromium()
    if found is None:
        pytest.fail(
            "the picture checks need a headless Chromium and none is installed: "
            "run `make browser` (Debian: apt-get install chromium)",
            pytrace=False,
        )
    return found
