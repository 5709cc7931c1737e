"""Evidence recall on real conversations: Timestone's search against three baselines.

    .venv/bin/python -m bench.conversations                  # the dev conversations
    .venv/bin/python -m bench.conversations --data PATH      # another copy of the file
    .venv/bin/python -m bench.conversations --keep /tmp/conv # keep (and reuse) the database
    .venv/bin/python -m bench.conversations --embedder onnx  # another embedder (a CLI spec)

The data: the first half of LoCoMo (long multi-session conversations, each question
annotated with the dialog turns that hold its evidence). It is read from
``../shared/data/conversations-dev.json`` relative to the project root (``--data``
overrides it) and never copied into the project (its licence is non-commercial); the
benchmark stops with a message when the file is missing.

The protocol: each conversation goes into a group of its own; every dialog turn is a
document (``add_document``) with uri = the turn's ``dia_id``, content = ``"Speaker:
text"`` plus ``" [shares a photo of CAPTION]"`` when the turn shares a photo, title =
its session (``D3`` for session 3, as the turn ids write it: the turns of a session
are messages of one source) and ``reference_time`` = the date of its session. Every
question with evidence (categories 1 multi-hop, 2 temporal, 3 open-domain, 4
single-hop) is asked through
``search(group, question, scopes=("episodes",), valid_at=None, limit=20)``; recall@k is
the share of the question's evidence turns among the top k uris, averaged over the
questions. Baselines, computed here over the same turns: Okapi BM25 (k1 1.2, b 0.75,
lower-cased alphanumeric tokens, common English stop words dropped), exact cosine over
the same embedder's vectors, and reciprocal rank fusion (k = 60) of the two.
``context(group, question, token_budget=N, valid_at=None)`` is scored the same way at 500,
1,000 and 2,000 tokens (a turn counts as held when an item carries its uri or its text).
Search latency p50/p95 end to end. Written to ``bench/results/conversations.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dateutil import parser as dateparser

import timestone
from timestone.cli._store import embedder_for

from ._common import percentiles, scratch_data_dir, write_result
from ._relevance import BM25, Dense, recall, rrf

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "conversations-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
BUDGETS = (500, 1000, 2000)


def session_time(text: str) -> datetime:
    """A session's date as the file writes it ("1:56 pm on 8 May, 2023"), in UTC."""
    return dateparser.parse(text).replace(tzinfo=UTC)


Turn = tuple[str, str, datetime, str]


def turns_of(conversation: dict[str, Any]) -> list[Turn]:
    """Every dialog turn of a conversation: (dia_id, content, its session's date, the
    session's label as LoCoMo writes it in its turn ids, ``D3`` for session 3)."""
    conv = conversation["conversation"]
    out: list[Turn] = []
    sessions = sorted(
        (int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k))),
    )
    for n in sessions:
        when = session_time(conv[f"session_{n}_date_time"])
        for turn in conv[f"session_{n}"]:
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [shares a photo of {turn['blip_caption']}]"
            out.append((turn["dia_id"], content, when, f"D{n}"))
    return out


def questions_of(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for q in conversation["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]


class Scores:
    """Recall of one system: per question, per k, with its category."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[int, float]]] = []

    def add(self, category: int, found: Sequence[str], evidence: Sequence[str]) -> None:
        self.rows.append((category, {k: recall(found, evidence, k) for k in KS}))

    def summary(self) -> dict[str, float]:
        def mean(xs: list[float]) -> float:
            return round(sum(xs) / len(xs), 3) if xs else float("nan")

        out = {f"R@{k}": mean([r[k] for _, r in self.rows]) for k in KS}
        for cat, name in CATEGORIES.items():
            out[name] = mean([r[10] for c, r in self.rows if c == cat])
        return out


def group_of(conversation: dict[str, Any], index: int) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", str(conversation.get("sample_id", index)).lower())


def load(mem: timestone.Memory, group: str, turns: Sequence[Turn]) -> None:
    """Write the turns as documents, unless the group already holds them all (a group
    left partly written is completed: the same document again is a no-op)."""
    held = mem.stats(group).get("episodes", {}).get("current", 0)
    if held >= len(turns):
        return
    for uri, content, when, session in turns:
        mem.add_document(group, uri, content, title=session, reference_time=when)


def held_by(ctx: timestone.Context, uri_of_text: dict[str, str]) -> set[str]:
    """The turns a context holds: by an item's uri, or by its text."""
    held: set[str] = set()
    for item in ctx.items:
        if item.document_uri is not None:
            held.add(item.document_uri)
        uri = uri_of_text.get(" ".join(item.text.split()))
        if uri is not None:
            held.add(uri)
    return held


def run(
    mem: timestone.Memory,
    data: list[dict[str, Any]],
    log: Callable[[str], None],
    budgets: Sequence[int] = BUDGETS,
) -> dict[str, Any]:
    systems = {name: Scores() for name in ("bm25", "dense", "rrf", "timestone")}
    contexts: dict[int, list[float]] = {b: [] for b in budgets}
    took: list[float] = []
    for index, conversation in enumerate(data):
        group = group_of(conversation, index)
        turns = turns_of(conversation)
        started = time.perf_counter()
        load(mem, group, turns)
        log(f"{group}: {len(turns)} turns loaded in {time.perf_counter() - started:.0f} s")
        uris = [t[0] for t in turns]
        texts = [t[1] for t in turns]
        uri_of_text = {" ".join(t.split()): u for u, t in zip(uris, texts, strict=True)}
        bm25 = BM25(texts)
        cosine = Dense(mem.embedder, texts)
        questions = questions_of(conversation)
        for q in questions:
            text, evidence, cat = q["question"], q["evidence"], q["category"]
            lexical = bm25.ranking(text)
            dense = cosine.ranking(text)
            systems["bm25"].add(cat, [uris[i] for i in lexical], evidence)
            systems["dense"].add(cat, [uris[i] for i in dense], evidence)
            systems["rrf"].add(cat, [uris[i] for i in rrf([lexical, dense])], evidence)
            start = time.perf_counter()
            res = mem.search(group, text, scopes=("episodes",), valid_at=None, limit=20)
            took.append((time.perf_counter() - start) * 1000)
            found = [e.document_uri or "" for e in res.episodes]
            systems["timestone"].add(cat, found, evidence)
            for budget in budgets:
                ctx = mem.context(group, text, token_budget=budget, valid_at=None)
                held = held_by(ctx, uri_of_text)
                contexts[budget].append(len(held & set(evidence)) / len(set(evidence)))
        log(f"{group}: {len(questions)} questions asked")
    return {
        "questions": len(systems["timestone"].rows),
        "systems": {name: s.summary() for name, s in systems.items()},
        "context_recall": {
            str(b): round(sum(xs) / max(1, len(xs)), 3) for b, xs in contexts.items()
        },
        "search_latency": percentiles(took),
    }


def table(result: dict[str, Any]) -> str:
    names = {
        "bm25": "Okapi BM25",
        "dense": "dense (exact cosine)",
        "rrf": "RRF k=60 of the two",
        "timestone": "Timestone search",
    }
    cols = [f"R@{k}" for k in KS] + list(CATEGORIES.values())
    lines = [
        "| system | " + " | ".join(cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for key, label in names.items():
        row = result["systems"][key]
        lines.append(f"| {label} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    best = max(result["systems"][k]["R@10"] for k in ("bm25", "dense", "rrf"))
    ours = result["systems"]["timestone"]["R@10"]
    lines.append("")
    lines.append(f"Timestone R@10 / best baseline: {ours / best:.3f}")
    ctx = result["context_recall"]
    if ctx:
        lines.append(
            "context() recall: "
            + ", ".join(f"{b} tokens {ctx[str(b)]:.3f}" for b in BUDGETS)
            + f" (BM25 top 10: {result['systems']['bm25']['R@10']:.3f})"
        )
    lat = result["search_latency"]
    lines.append(f"search latency: p50 {lat['p50_ms']:.1f} ms, p95 {lat['p95_ms']:.1f} ms")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"the conversations file (default: {DEFAULT_DATA})",
    )
    parser.add_argument("--keep", type=Path, help="keep the database in this directory (reused)")
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument(
        "--search-only",
        action="store_true",
        help="no context() calls (written to conversations-search.json)",
    )
    parser.add_argument(
        "--embedder", help="an embedder as the command line names it (default: WordLlama)"
    )
    args = parser.parse_args(argv)
    embedder = embedder_for(args.embedder, None)
    path: Path = args.data
    print(f"reading the conversations from {path}")
    if not path.is_file():
        raise SystemExit(
            f"{path} not found: this benchmark reads the LoCoMo conversations from there"
            " (never copied into the project); pass --data PATH to another copy"
        )
    data: list[dict[str, Any]] = json.loads(path.read_text())
    if args.conversations is not None:
        data = data[: args.conversations]

    def log(line: str) -> None:
        print(line, flush=True)

    budgets = () if args.search_only else BUDGETS
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        with timestone.Memory.open(data_dir=args.keep, llm=None, embedder=embedder) as mem:
            result = run(mem, data, log, budgets)
    else:
        with (
            scratch_data_dir() as tmp,
            timestone.Memory.open(data_dir=tmp, llm=None, embedder=embedder) as mem,
        ):
            result = run(mem, data, log, budgets)
    result["data"] = path.name
    result["embedder"] = embedder.name
    out = write_result("conversations-search" if args.search_only else "conversations", result)
    print(table(result))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
