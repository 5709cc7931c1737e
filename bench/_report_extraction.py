"""The table of ``bench.extraction``: a real model's extraction against hand-written facts."""

from __future__ import annotations

from bench._report_tables import Lines, Result, count, pace, ratio, table


def extraction_section(r: Result) -> Lines:
    s = r["summary"]
    out: Lines = [
        f"Model: **{r['model']}**, each answer capped at {r['max_tokens']} tokens.",
        "",
    ]
    out += table(
        ["scored on", "precision", "recall", "F1"],
        [
            [name, ratio(s[key]["precision"]), ratio(s[key]["recall"]), ratio(s[key]["f1"])]
            for name, key in (
                ("entities", "entities"),
                ("facts (same two entities)", "facts"),
                ("facts (and the same relation)", "facts_exact"),
            )
        ],
        [False, True, True, True],
    )
    out += [
        "",
        f"{s['written']} of {s['episodes']} episodes written. Dropped: the entities and facts "
        "of an answer the library set aside, each with an `ExtractionWarning` (a name that is "
        "not in the text, a fact naming an entity that was not extracted).",
        "",
    ]
    out += table(
        [
            "episode",
            "source",
            "outcome",
            "facts right / found / hand-written",
            "dropped",
            "calls",
            "tokens",
            "s",
        ],
        [
            [
                e["episode"],
                e["source"],
                e["outcome"].split(":")[0],
                f"{e['facts_right']} / {e['facts_found']} / {e['facts_gold']}",
                str(e.get("dropped", "")),
                str(e["calls"]),
                count(e["prompt_tokens"] + e["completion_tokens"]),
                ratio(e["seconds"], 1),
            ]
            for e in r["episodes"]
        ],
        [False, False, False, True, True, True, True, True],
    )
    out += [
        "",
        f"Per episode: {ratio(s['calls_per_episode'])} calls, {count(s['tokens_per_episode'])} "
        f"tokens, {ratio(s['seconds_per_episode'], 1)} s"
        + (f" (pace {pace(r)} ms, 42 to 47 when quiet)." if pace(r) else "."),
    ]
    return out
