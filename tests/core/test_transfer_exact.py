"""An export is one snapshot of its group, and an import under another group id behaves
as the exported group does: the same call repeated there writes nothing."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import timestone
from timestone import FactInput


def _year(y: int) -> datetime:
    return datetime(y, 1, 1, tzinfo=UTC)


class _WriteWhileExporting:
    """A file that, once the export has written its header, lets another client commit a
    write to the group being exported."""

    def __init__(self, write: object) -> None:
        self.parts: list[str] = []
        self.write_once = write

    def write(self, text: str) -> int:
        self.parts.append(text)
        if callable(self.write_once):
            then, self.write_once = self.write_once, None
            then()
        return len(text)


def test_an_export_is_one_snapshot(memory: timestone.Memory, dsn: str, group: str) -> None:
    for i in range(3):
        memory.add_facts(
            group, [FactInput(f"P{i}", "WORKS_AT", f"C{i}")], reference_time=_year(2020 + i)
        )
    with timestone.Memory.open(dsn, warm=False) as other:
        out = _WriteWhileExporting(
            lambda: other.add_facts(
                group, [FactInput("Late", "WORKS_AT", "Late Corp")], reference_time=_year(2024)
            )
        )
        counts = memory.export_group(group, out)
    assert counts["episodes"] == 3  # the write committed after the export began
    copy = memory.import_group("".join(out.parts).splitlines(), group_id=group + "-copy")
    assert copy == {table: n for table, n in counts.items() if n}
    assert len(memory.facts(group)) == 4


def test_the_same_call_on_an_imported_copy_writes_nothing(
    memory: timestone.Memory, group: str
) -> None:
    facts = [FactInput("Ann", "WORKS_AT", "Acme")]
    memory.add_facts(group, facts, reference_time=_year(2020))
    memory.add_facts(group, facts, reference_time=_year(2021), idempotency_key="mine")
    lines: list[str] = []

    class Lines:
        def write(self, text: str) -> int:
            lines.append(text)
            return len(text)

    memory.export_group(group, Lines())
    copy = group + "-copy"
    memory.import_group("".join(lines).splitlines(), group_id=copy)
    for target in (group, copy):
        again = memory.add_facts(target, facts, reference_time=_year(2020))
        assert not again.created, target
        mine = memory.add_facts(target, facts, reference_time=_year(2021), idempotency_key="mine")
        assert not mine.created, target
        assert len(memory.episodes(target)) == 2


def test_an_item_holding_negative_zero_reads_the_same_after_an_import(
    memory: timestone.Memory, group: str
) -> None:
    """An item's value reads back as written, -0.0 included (its JSON text is kept,
    migration 0033); an export and an import keep that text too."""
    memory.put_item(group, ("prefs",), "offset", {"x": -0.0, "y": [-0.0, 1.5]})
    parts: list[str] = []

    class Sink:
        def write(self, text: str) -> int:
            parts.append(text)
            return len(text)

    memory.export_group(group, Sink())
    memory.import_group("".join(parts).split("\n"), group_id=group + "-copy")
    for target in (group, group + "-copy"):
        item = memory.get_item(target, ("prefs",), "offset")
        assert item is not None
        value = item.value
        assert [math.copysign(1.0, v) for v in (value["x"], *value["y"])] == [-1.0, -1.0, 1.0]
