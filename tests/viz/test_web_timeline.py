"""The web view's /timeline page for a name typed by hand: the entity found is the one shown."""

from __future__ import annotations

import threading
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

import pytest

import timestone
from timestone.viz.web import make_server


def _get(base: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(base + path, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.parametrize(
    ("typed", "name", "fact"),
    [
        ("Zoe", "Zoë", "Zoë visits Lyon."),
        ("Acme Corp", "Acme Corp.", "Acme Corp. is based in Lyon."),
        ("Zoë", "Zoë", "Zoë visits Lyon."),
    ],
)
def test_a_near_spelling_shows_the_timeline_of_the_entity_it_finds(
    memory: timestone.Memory, group: str, typed: str, name: str, fact: str
) -> None:
    """``/timeline?entity=Zoe`` finds Zoë (names compare without accents and punctuation,
    as ``get_entity`` does); the page is Zoë's timeline, titled with her stored name, not
    an empty timeline of the name as typed."""
    memory.add_facts(
        group,
        [
            timestone.FactInput("Zoë", "VISITS", "Lyon", fact="Zoë visits Lyon."),
            timestone.FactInput(
                "Acme Corp.", "BASED_IN", "Lyon", fact="Acme Corp. is based in Lyon."
            ),
        ],
        reference_time=datetime.fromisoformat("2020-01-01T00:00:00+00:00"),
    )
    server = make_server(memory, group, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        status, page = _get(base, "/timeline?entity=" + urllib.parse.quote(typed))
        assert status == 200
        assert fact in page
        assert page.count('class="bar current"') == 1
        assert f"<h1>{name}</h1>" in page
        assert "1 fact(s) held now" in page
        assert _get(base, "/timeline?entity=Zoey")[0] == 404
    finally:
        server.shutdown()
        server.server_close()
