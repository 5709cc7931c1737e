"""What ``timestone.distributed.distribute`` made, or found (shared by both twins)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Distribution"]


@dataclass(frozen=True)
class Distribution:
    """The Timestone tables of a Citus cluster: how many are distributed (by
    ``group_id``) and reference tables, the shards of the distributed ones, and the
    workers (``host:port``) that hold them."""

    distributed_tables: int
    reference_tables: int
    shards: int
    workers: tuple[str, ...]
