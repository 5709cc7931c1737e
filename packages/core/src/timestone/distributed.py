"""The distributed mode: Timestone on a Citus cluster, each tenant on one shard.

``distribute(dsn)`` (``adistribute`` in async code) is the one step that turns the
Timestone schema of a Citus coordinator's database distributed; ``Memory.open`` on that
coordinator then acts on the cluster by itself. See ``docs/scale.md``.
"""

from __future__ import annotations

from ._aio._distributed import distribute as adistribute
from ._distribution import Distribution
from ._sync._distributed import distribute

__all__ = ["Distribution", "adistribute", "distribute"]
