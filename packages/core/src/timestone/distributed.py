"""The distributed mode: Timestone on a Citus cluster, each tenant on one shard.

``distribute(dsn)`` (``adistribute`` in async code) is the one step that turns the
Timestone schema of a Citus coordinator's database distributed; ``Memory.open`` on that
coordinator then acts on the cluster by itself. See ``docs/scale.md``.
"""

from __future__ import annotations

from .db._distributed import distribute
from .db._distributed_async import distribute as adistribute
from .db._distribution import Distribution

__all__ = ["Distribution", "adistribute", "distribute"]
