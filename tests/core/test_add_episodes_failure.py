"""``add_episodes`` when one episode fails: no episode starts after the failure, those
already running end before the error is raised (nothing of the call is written after
it), the error names the failing item, and the same call again writes the rest."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any, cast

import httpx
import openai
import pytest

import timestone
from timestone.errors import UnusableAnswer
from timestone.llm import chat_completion

TOLD = datetime(2024, 6, 1, tzinfo=UTC)
NAMES = ["Ada", "Bram", "Cleo", "Dina", "Emil"]
EPISODES = [
    {"content": f"{name} joined Acme as a cooper.", "reference_time": TOLD} for name in NAMES
]


def _answer(episode: str) -> dict[str, Any]:
    name = episode.split()[0]
    return {
        "entities": [
            {"name": name, "type": "Person", "attributes": []},
            {"name": "Acme", "type": "Organization", "attributes": []},
        ],
        "facts": [
            {
                "source": name,
                "relation": "WORKS_AT",
                "target": "Acme",
                "fact": f"{name} works at Acme.",
                "valid_at": None,
                "invalid_at": None,
                "attributes": [],
            }
        ],
    }


class Model:
    """A scripted model: it refuses the episodes named in ``refused`` (at once), and
    answers the others after a pause, as a slower model does."""

    def __init__(self, refused: set[str]) -> None:
        self.refused = refused
        self.asked: list[str] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["response_format"]["json_schema"]["name"] == "fact_resolution":
            # the new fact (one per episode) is neither a duplicate nor a contradiction
            judged: dict[str, Any] = {
                "judgements": [{"new": 0, "duplicate_of": None, "contradicts": []}]
            }
            return httpx.Response(200, json=chat_completion(json.dumps(judged)))
        episode = body["messages"][-1]["content"].split("<CURRENT_EPISODE>\n", 1)[1]
        name = episode.split()[0]
        self.asked.append(name)
        if name in self.refused:
            refusal = chat_completion(None, refusal="I can't help with that.", completion_tokens=7)
            return httpx.Response(200, json=refusal)
        await asyncio.sleep(0.3)
        return httpx.Response(200, json=chat_completion(json.dumps(_answer(episode))))


def _llm(model: Model) -> timestone.OpenAICompatibleLLM:
    client = openai.AsyncOpenAI(
        api_key="sk-test",
        http_client=cast(Any, httpx.AsyncClient(transport=httpx.MockTransport(model))),
    )
    return timestone.OpenAICompatibleLLM(async_client=client, model="m", backoff=0.0)


async def test_nothing_is_written_after_the_error_and_the_same_call_writes_the_rest(
    dsn: str, group: str
) -> None:
    model = Model(refused={"Bram"})
    mem = await timestone.AsyncMemory.open(dsn, llm=_llm(model), infer_cardinality=False)
    try:
        reported: list[str] = []

        def progress(done: int, total: int, result: timestone.IngestResult) -> None:
            reported.append(result.episode.content)

        with pytest.raises(UnusableAnswer, match=r"^episodes\[1\]: extraction: the model gave no"):
            await mem.add_episodes(group, EPISODES, concurrency=2, on_progress=progress)
        written = [e.content for e in await mem.episodes(group)]
        assert written == reported == [EPISODES[0]["content"]]  # the one running beside it
        assert sorted(model.asked) == ["Ada", "Bram"]  # none started after the error
        await asyncio.sleep(0.5)
        assert [e.content for e in await mem.episodes(group)] == written

        model.refused.clear()
        model.asked.clear()
        again = await mem.add_episodes(group, EPISODES, concurrency=2)
        assert [r.created for r in again] == [False, True, True, True, True]
        assert sorted(model.asked) == ["Bram", "Cleo", "Dina", "Emil"]
        assert len(await mem.episodes(group)) == 5
    finally:
        await mem.close()


async def test_episodes_failing_side_by_side_raise_the_first(dsn: str, group: str) -> None:
    model = Model(refused={"Ada", "Bram"})
    mem = await timestone.AsyncMemory.open(dsn, llm=_llm(model), infer_cardinality=False)
    try:
        with pytest.raises(UnusableAnswer, match=r"^episodes\[[01]\]: ") as err:
            await mem.add_episodes(group, EPISODES, concurrency=2)
        assert str(err.value).count("episodes[") == 1
        assert sorted(model.asked) == ["Ada", "Bram"]
        assert await mem.episodes(group) == []
    finally:
        await mem.close()
