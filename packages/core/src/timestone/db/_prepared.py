"""Whether the pool's connections prepare their statements.

psycopg prepares a statement on a connection once it has run five times there
(a search, at its first use), and Postgres keeps it for that session. Behind
a pooler in transaction mode each transaction may run on another server
connection, which does not hold it, unless the pooler carries prepared
statements across (PgBouncer from 1.21, with ``max_prepared_statements``).
For a pooler that does not, ``Memory.open(prepared_statements=False)`` or
``TIMESTONE_PREPARED_STATEMENTS=off`` prepares nothing: every statement is then
planned each time it runs.
"""

from __future__ import annotations

import os

from ..errors import InvalidInput

__all__ = ["VARIABLE", "prepared_statements"]

VARIABLE = "TIMESTONE_PREPARED_STATEMENTS"
_SWITCH = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


def prepared_statements(value: object) -> bool:
    """``Memory.open``'s ``prepared_statements``; with None, the environment variable
    ``VARIABLE`` (on or off; unset: on)."""
    if value is None:
        text = os.environ.get(VARIABLE)
        if text is None:
            return True
        found = _SWITCH.get(text.strip().lower())
        if found is None:
            raise InvalidInput(f"{VARIABLE} must be on or off, got {text!r:.80}")
        return found
    if not isinstance(value, bool):
        raise InvalidInput(
            f"prepared_statements must be True, False or None, got {type(value).__name__}"
        )
    return value
