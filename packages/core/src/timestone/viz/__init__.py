"""Pictures of time: an entity's timeline as HTML (and PNG where a headless browser is)."""

from .browser import find_chromium, screenshot
from .timeline import timeline_html, timeline_svg

__all__ = ["find_chromium", "screenshot", "timeline_html", "timeline_svg"]
