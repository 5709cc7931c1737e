"""What ``timestone.distributed.distribute`` takes and what it made, or found (shared
by both twins)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidInput

__all__ = ["Distribution", "check_dsn"]


def check_dsn(dsn: object) -> str:
    """``distribute``'s ``dsn``: a non-empty string (an empty or blank one would reach
    libpq's defaults, and distribute whatever database they point to)."""
    if not isinstance(dsn, str) or not dsn.strip():
        shown = repr(dsn) if isinstance(dsn, str) else type(dsn).__name__
        raise InvalidInput(
            f"dsn must be the connection string (postgresql://...) of a Citus coordinator, "
            f"got {shown:.80}"
        )
    return dsn


@dataclass(frozen=True)
class Distribution:
    """The Timestone tables of a Citus cluster: how many are distributed (by
    ``group_id``) and reference tables, the shards of the distributed ones, and the
    workers (``host:port``) that hold them."""

    distributed_tables: int
    reference_tables: int
    shards: int
    workers: tuple[str, ...]
