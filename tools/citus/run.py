"""``make test-citus``: build Citus (once), run the tests on a local cluster, summarize.

Builds Citus from the vendored source into the cache (``tools.citus.build``; reused when
present), then runs ``tests/citus`` with pytest in this process. Their conftest starts a
coordinator and two workers and stops every server it started when the session ends,
also when a test fails. The last line printed is::

    citus: N distributed tables, M shards on 2 workers; K passed

The exit status is pytest's: 0 only when every test passed.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tools.citus.build import ensure_built
from tools.citus.cluster import SUMMARY


class _Passed:
    """Counts the tests that passed (their call phase)."""

    def __init__(self) -> None:
        self.passed = 0

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" and report.passed:
            self.passed += 1


def main(argv: list[str]) -> int:
    build = ensure_built()
    print(f"citus build: {build.home}", flush=True)
    counter = _Passed()
    status = int(pytest.main(["-q", "-p", "no:cacheprovider", "tests/citus", *argv], [counter]))
    if status != 0:
        print(f"citus: the tests failed (pytest exit status {status}); {counter.passed} passed")
        return status
    print(
        f"citus: {SUMMARY.get('distributed_tables', 0)} distributed tables, "
        f"{SUMMARY.get('shards', 0)} shards on {SUMMARY.get('workers', 0)} workers; "
        f"{counter.passed} passed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
