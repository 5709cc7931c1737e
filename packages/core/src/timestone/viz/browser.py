"""A headless Chromium, where one is installed: screenshots and the rendered DOM of a page.

Chromium runs with a fresh profile, no sandbox (it is often root in
containers), and every background network feature off: it loads the local
file and nothing else.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from ..errors import InvalidInput, TimestoneError

__all__ = ["BrowserError", "dump_dom", "find_chromium", "screenshot"]

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)


class BrowserError(TimestoneError):
    """No headless browser is installed, or it failed to render the page."""


def find_chromium() -> str | None:
    """The path of a Chromium-family browser, or ``None``."""
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    browser = find_chromium()
    if browser is None:
        raise BrowserError(
            "no headless browser found for the PNG: install Chromium "
            "(Debian: apt-get install chromium), or use the HTML page"
        )
    with tempfile.TemporaryDirectory(prefix="timestone-chromium-") as profile:
        cmd = [browser, *_FLAGS, f"--user-data-dir={profile}", *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise BrowserError(f"Chromium did not finish within {timeout:.0f} s") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or "").strip().splitlines()[-3:]
        raise BrowserError(f"Chromium failed (exit {proc.returncode}): {' / '.join(tail)}")
    return proc


def screenshot(
    page: Path, out: Path, *, width: int = 1160, height: int = 600, timeout: float = 60.0
) -> Path:
    """Render the local ``page`` and write a PNG of the window to ``out``. Chromium writes
    it to a new file beside ``out``, which replaces ``out`` only once it is checked to be
    a PNG: a failed screenshot leaves ``out`` as it was, and never passes for a new one."""
    if out.is_dir():
        raise InvalidInput(f"the screenshot {out} is a folder; name the PNG file to write")
    folder = out.absolute().parent
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{out.name}.") as scratch:
        drawn = Path(scratch) / "screenshot.png"
        _run(
            [f"--screenshot={drawn}", f"--window-size={width},{height}", page.resolve().as_uri()],
            timeout,
        )
        _check_png(drawn, out)
        os.replace(drawn, out)
    return out


def _check_png(drawn: Path, out: Path) -> None:
    """Refuse what Chromium left at ``drawn`` unless it is a regular file holding a PNG."""
    try:
        mode = drawn.lstat().st_mode
    except FileNotFoundError:
        raise BrowserError(f"Chromium wrote no screenshot for {out}") from None
    if not stat.S_ISREG(mode):
        raise BrowserError(f"Chromium wrote no screenshot file for {out}")
    with drawn.open("rb") as f:
        head = f.read(len(_PNG_SIGNATURE))
    if head != _PNG_SIGNATURE:
        raise BrowserError(f"Chromium wrote something other than a PNG for {out}")


def dump_dom(page: Path | str, *, timeout: float = 60.0, budget_ms: int | None = None) -> str:
    """The page's DOM after its scripts ran, as HTML. ``page``: a local file, or the URL of
    a page on this machine (``http://127.0.0.1:...``). ``budget_ms``: let the page's
    timers and requests run for that long (virtual time) before the DOM is taken."""
    where = page if isinstance(page, str) else page.resolve().as_uri()
    wait = [] if budget_ms is None else [f"--virtual-time-budget={budget_ms}"]
    return _run([*wait, "--dump-dom", where], timeout).stdout
