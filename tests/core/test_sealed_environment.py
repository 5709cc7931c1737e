"""The test run is sealed from its caller: junk ``OPENAI_*``/``TIMESTONE_*``/``PG*``
variables change nothing, and a test that would call a real model fails loudly.

Each check runs an inner pytest session under the suite's own ``tests/conftest.py``
in a subprocess whose environment holds the junk, as a developer's shell might.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).parents[1] / "conftest.py"

JUNK = {
    "OPENAI_API_KEY": "sk-junk",
    "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    "TIMESTONE_DSN": "postgresql://nope",
    "TIMESTONE_DATA_DIR": "/nonexistent",
    "TIMESTONE_LLM_MODEL": "junk-model",
    "TIMESTONE_GROUP": "junk-group",
    "TIMESTONE_PREPARED_STATEMENTS": "junk",
    "PGHOST": "/nonexistent",
}

INNER = """
import os
import subprocess
import sys

import openai

import timestone


def test_the_environment_is_clean_here_and_in_subprocesses():
    seen = [k for k in os.environ if k.startswith(("OPENAI_", "TIMESTONE_", "PG"))]
    assert seen == []
    assert timestone.OpenAICompatibleLLM.from_env() is None
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(k for k in os.environ"
         " if k.startswith(('OPENAI_', 'TIMESTONE_', 'PG'))))"],
        capture_output=True, text=True, check=True,
    )
    assert child.stdout.strip() == "[]"


def test_a_model_request_fails_loudly():
    client = openai.OpenAI(api_key="sk-x", base_url="http://127.0.0.1:9/v1", max_retries=3)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


def test_a_swallowed_model_request_still_fails():
    client = openai.OpenAI(api_key="sk-x", base_url="http://127.0.0.1:9/v1", max_retries=0)
    try:
        client.embeddings.create(model="e", input="hi")
    except BaseException:
        pass
"""


def test_junk_in_the_environment_changes_nothing_and_model_requests_fail(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = session\n"
    )
    pytester.makepyfile(test_inner=INNER)
    for name, value in JUNK.items():
        monkeypatch.setenv(name, value)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", timeout=120)
    result.assert_outcomes(passed=2, failed=1, errors=1)
    out = result.stdout.str()
    assert "PASSED test_inner.py::test_the_environment_is_clean_here_and_in_subprocesses" in out
    assert "PASSED test_inner.py::test_a_swallowed_model_request_still_fails" in out
    assert "FAILED test_inner.py::test_a_model_request_fails_loudly" in out
    assert "ModelRequestBlocked: a test tried to reach a real model (POST " in out
    assert "ALLOW_MODEL_REQUESTS is False" in out
    # the exception went through the SDK's retry loop (max_retries=3) untouched: one try
    assert out.count("E           conftest.ModelRequestBlocked: a test tried") == 1
    assert "ERROR at teardown of test_a_swallowed_model_request_still_fails" in out
    assert "a test tried to reach a real model: http://127.0.0.1:9/v1/embeddings" in out
