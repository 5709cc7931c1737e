"""Group ids: the tenant key every call names."""

from __future__ import annotations

import re

from .errors import InvalidGroup

__all__ = ["check_group"]

_GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}")


def check_group(group_id: object) -> str:
    """Refuse anything but a string of 1 to 128 of ``A-Z a-z 0-9 _ . : @ -``, not starting with
    punctuation."""
    if not isinstance(group_id, str):
        raise InvalidGroup(f"group_id must be a string, got {type(group_id).__name__}")
    if not group_id:
        raise InvalidGroup("group_id is empty; every call names the group (tenant) it works in")
    if not _GROUP.fullmatch(group_id):
        raise InvalidGroup(
            f"group_id {group_id[:64]!r} is malformed: use 1 to 128 characters of letters, "
            "digits and _ . : @ -, starting with a letter or digit"
        )
    return group_id
