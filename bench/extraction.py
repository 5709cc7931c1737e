"""Extraction by a real model: precision, recall and F1 against hand-written facts.

    .venv/bin/python -m bench.extraction                     # the local server of make test-model
    .venv/bin/python -m bench.extraction --base-url URL --model NAME [--api-key KEY]

Each episode of ``tests/model/episodes.json`` (text, messages, JSON) goes through
``add_episode`` on a fresh embedded database, one group per episode, with
``OpenAICompatibleLLM`` on the endpoint. By default that is the local server
(``tools.model``: llama-cpp-python with the packaged SmolLM2-135M-Instruct), built and
started the same way as for ``python -m tools.model.run`` and stopped at the end.

Scores, over all episodes (an episode that failed extracted nothing):

- entities: the names written, against the names the hand-written facts use
  (normalized as the library normalizes names);
- facts: a written fact matches a hand-written one when it joins the same two entities,
  either way round (the relation vocabulary is open: ``EMPLOYED_BY`` says what
  ``WORKS_AT`` says); ``exact`` also needs the relation's name and the direction.

Per episode: the outcome, the calls and tokens the server counted (``usage``), the
seconds. Writes ``bench/results/extraction.json``; ``bench.report`` turns it into a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from collections.abc import Generator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import timestone
from bench._common import RESULTS, cpu_pace_ms, scratch_data_dir
from timestone._names import normalize, relation_name
from timestone.errors import ExtractionWarning, LLMError
from tools.model.client import Recorder, local_llm
from tools.model.episodes import Episode, load_episodes


@dataclass
class Scored:
    episode: str
    source: str
    outcome: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    entities_gold: int
    entities_found: int
    entities_right: int
    facts_gold: int
    facts_found: int
    facts_right: int
    facts_exact: int
    # what the library dropped of the answer, each with an ExtractionWarning (a name not
    # in the text, a fact naming an entity not extracted, a relation outside the ontology)
    dropped: int


def prf(right: int, found: int, gold: int) -> dict[str, float]:
    precision = right / found if found else 0.0
    recall = right / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 3), "recall": round(recall, 3), "f1": round(f1, 3)}


def score(
    episode: Episode, result: timestone.IngestResult | None
) -> tuple[int, int, int, int, int, int, int]:
    gold_names = {normalize(n) for s, _, t in episode.facts for n in (s, t)}
    gold_pairs = [frozenset((normalize(s), normalize(t))) for s, _, t in episode.facts]
    gold_triples = {(normalize(s), relation_name(r), normalize(t)) for s, r, t in episode.facts}
    found_names = {normalize(e.name) for e in result.entities} if result else set[str]()
    facts = list(result.facts) if result else []
    found_pairs = {frozenset((normalize(f.source), normalize(f.target))) for f in facts}
    found_triples = {(normalize(f.source), f.relation, normalize(f.target)) for f in facts}
    return (
        len(gold_names),
        len(found_names),
        len(found_names & gold_names),
        len(gold_pairs),
        len(found_pairs),
        len(found_pairs & set(gold_pairs)),
        len(found_triples & gold_triples),
    )


@contextmanager
def local_endpoint() -> Generator[tuple[str, str, str]]:
    """The local model server of ``tools.model``: (base URL, model name, the model's name)."""
    from tools.model.build import LLAMA_CPP_PYTHON, MODEL_NAME, ensure_built
    from tools.model.server import Server

    with Server(ensure_built()) as server:
        server_name = LLAMA_CPP_PYTHON.replace("==", " ")
        yield server.base_url, server.model, f"{MODEL_NAME} on {server_name}"


def run(
    episodes: list[Episode],
    base_url: str,
    model: str,
    api_key: str,
    max_tokens: int | None,
) -> list[Scored]:
    llm, recorder = local_llm(base_url, model, api_key=api_key, max_tokens=max_tokens)
    try:
        return _run(episodes, llm, recorder)
    finally:
        recorder.close()


def _run(
    episodes: list[Episode], llm: timestone.OpenAICompatibleLLM, recorder: Recorder
) -> list[Scored]:
    out: list[Scored] = []
    with scratch_data_dir() as data_dir, timestone.Memory.open(data_dir=data_dir, llm=llm) as mem:
        for n, episode in enumerate(episodes):
            recorder.clear()
            started = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ExtractionWarning)
                try:
                    result = mem.add_episode(
                        f"bench-{n}",
                        episode.content,
                        reference_time=episode.reference_time,
                        source=episode.source,
                    )
                    outcome = "written"
                except LLMError as exc:
                    result, outcome = None, f"{type(exc).__name__}: {exc}"[:200]
            seconds = time.perf_counter() - started
            dropped = sum(issubclass(w.category, ExtractionWarning) for w in caught)
            out.append(scored(episode, result, outcome, recorder, seconds, dropped))
            print(f"{episode.id}: {outcome[:80]} ({seconds:.1f} s)", flush=True)
    return out


def scored(
    episode: Episode,
    result: timestone.IngestResult | None,
    outcome: str,
    recorder: Recorder,
    seconds: float,
    dropped: int,
) -> Scored:
    prompt, completion = recorder.tokens()
    return Scored(
        episode.id,
        episode.source,
        outcome,
        len(recorder.answered),
        prompt,
        completion,
        round(seconds, 2),
        *score(episode, result),
        dropped,
    )


def summary(rows: list[Scored]) -> dict[str, Any]:
    def total(field: str) -> int:
        return sum(int(getattr(r, field)) for r in rows)

    n = len(rows)
    return {
        "episodes": n,
        "written": sum(r.outcome == "written" for r in rows),
        "entities": prf(total("entities_right"), total("entities_found"), total("entities_gold")),
        "facts": prf(total("facts_right"), total("facts_found"), total("facts_gold")),
        "facts_exact": prf(total("facts_exact"), total("facts_found"), total("facts_gold")),
        "dropped_per_episode": round(total("dropped") / n, 2),
        "calls_per_episode": round(total("calls") / n, 2),
        "tokens_per_episode": round((total("prompt_tokens") + total("completion_tokens")) / n),
        "seconds_per_episode": round(sum(r.seconds for r in rows) / n, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: local)")
    parser.add_argument("--model", help="the model's name at that endpoint")
    parser.add_argument("--api-key", default="unused")
    parser.add_argument("--label", help="how the results name the model")
    parser.add_argument("--max-tokens", type=int, default=768, help="cap of each answer")
    parser.add_argument("--out", type=Path, default=RESULTS / "extraction.json")
    args = parser.parse_args(argv)
    episodes = load_episodes()
    pace_before = cpu_pace_ms()
    with ExitStack() as stack:
        if args.base_url:
            if not args.model:
                parser.error("--model is needed with --base-url")
            base_url, model, label = args.base_url, args.model, args.label or args.model
        else:
            base_url, model, label = stack.enter_context(local_endpoint())
        rows = run(episodes, base_url, model, args.api_key, args.max_tokens)
    result: dict[str, Any] = {
        "model": label,
        "endpoint": "local" if not args.base_url else "given",
        "max_tokens": args.max_tokens,
        "summary": summary(rows),
        # the machine's pace around the run (a fixed CPU loop, ms; 42 to 47 when quiet)
        "cpu_pace_ms_before_after": [pace_before, cpu_pace_ms()],
        "episodes": [asdict(r) for r in rows],
        "machine": {"cpus": platform.processor() or platform.machine()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    s: dict[str, Any] = result["summary"]
    print(
        f"{label}: facts F1 {s['facts']['f1']:.2f} (P {s['facts']['precision']:.2f}, "
        f"R {s['facts']['recall']:.2f}), entities F1 {s['entities']['f1']:.2f}, "
        f"{s['written']}/{s['episodes']} written; {s['calls_per_episode']} calls, "
        f"{s['tokens_per_episode']} tokens, {s['seconds_per_episode']} s per episode"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
