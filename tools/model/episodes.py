"""The hand-written episodes of ``tests/model/episodes.json`` and the facts a reader
extracts from each: what ``tests/model`` ingests and ``bench/extraction.py`` scores."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

EPISODES_FILE = Path(__file__).resolve().parents[2] / "tests" / "model" / "episodes.json"


@dataclass(frozen=True)
class Episode:
    id: str
    source: str
    content: str
    reference_time: datetime
    facts: list[tuple[str, str, str]]


def load_episodes(path: Path = EPISODES_FILE) -> list[Episode]:
    data = cast(dict[str, Any], json.loads(path.read_text()))
    return [
        Episode(
            id=str(e["id"]),
            source=str(e["source"]),
            content=str(e["content"]),
            reference_time=datetime.fromisoformat(str(e["reference_time"])),
            facts=[(str(s), str(r), str(t)) for s, r, t in e["facts"]],
        )
        for e in cast(list[dict[str, Any]], data["episodes"])
    ]
