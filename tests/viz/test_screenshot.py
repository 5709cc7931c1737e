"""``screenshot`` answers for a PNG that Chromium wrote in this run, at the path named: a
folder is refused before Chromium starts, and a browser that wrote nothing, or something
else than a PNG, fails the call and leaves the file of an earlier run as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from timestone.errors import InvalidInput
from timestone.viz.browser import BrowserError, screenshot

PAGE = "<!doctype html><title>t</title><p>a page</p>"


def _page(tmp_path: Path) -> Path:
    page = tmp_path / "page.html"
    page.write_text(PAGE)
    return page


def _browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: str | None) -> None:
    """A stand-in ``chromium`` first on the PATH: it exits 0, and writes ``writes`` to the
    path of ``--screenshot`` (nothing when None), as a browser that failed quietly would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    body = "" if writes is None else f"printf '{writes}' > \"${{a#--screenshot=}}\";;"
    script = bin_dir / "chromium"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in --screenshot=*) ' + (body or ":;;") + " esac; done\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


def test_a_folder_is_refused_before_the_browser_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-browser-here"))
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(InvalidInput) as caught:
        screenshot(_page(tmp_path), folder)
    assert str(caught.value) == f"the screenshot {folder} is a folder; name the PNG file to write"
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize(
    ("writes", "message"),
    [
        (None, "Chromium wrote no screenshot for {out}"),
        ("not a picture", "Chromium wrote something other than a PNG for {out}"),
    ],
)
def test_a_screenshot_not_written_now_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: str | None, message: str
) -> None:
    out = tmp_path / "out.png"
    out.write_bytes(b"\x89PNG\r\n\x1a\n from an earlier run")
    _browser(tmp_path, monkeypatch, writes)
    with pytest.raises(BrowserError) as caught:
        screenshot(_page(tmp_path), out)
    assert str(caught.value) == message.format(out=out)
    assert out.read_bytes() == b"\x89PNG\r\n\x1a\n from an earlier run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "out.png", "page.html"]


def test_a_real_screenshot_replaces_the_earlier_file(chromium: str, tmp_path: Path) -> None:
    del chromium
    out = tmp_path / "out.png"
    out.write_bytes(b"from an earlier run")
    assert screenshot(_page(tmp_path), out, width=400, height=300) == out
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 400
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.png", "page.html"]
