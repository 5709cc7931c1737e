"""``timestone.models``: what ``engine`` and ``group_session`` refuse when called."""

from __future__ import annotations

import pytest

from timestone.errors import InvalidInput
from timestone.models import engine, group_session


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [(5, "int"), (None, "NoneType"), ("", "an empty string"), (" ", "an empty string")],
)
def test_engine_refuses_what_is_no_dsn(dsn: object, shown: str) -> None:
    with pytest.raises(InvalidInput) as err:
        engine(dsn)  # pyright: ignore[reportArgumentType]
    assert str(err.value) == (
        f"dsn must be a connection string (postgresql://..., or Memory.dsn), got {shown}"
    )


@pytest.mark.parametrize(
    ("bind", "shown"), [("postgresql://localhost/x", "str"), (None, "NoneType")]
)
def test_group_session_refuses_what_is_no_engine(bind: object, shown: str) -> None:
    """A DSN where the engine goes is the easy mistake: refused when the session is made,
    not at its first query."""
    with pytest.raises(InvalidInput) as err:
        group_session(bind, "g")  # pyright: ignore[reportArgumentType]
    assert str(err.value) == (
        "bind must be a SQLAlchemy Engine (make one with timestone.models.engine(mem.dsn)), "
        f"got {shown}"
    )
