"""Timestone's memory as LlamaIndex tools: ``TimestoneToolSpec(memory, group).to_tool_list()``."""

from ._spec import TimestoneToolSpec

__all__ = ["TimestoneToolSpec"]
