"""MkDocs hooks of the documentation site (``make docs``).

- The home page is the README, so the front door is written once: its links into
  ``docs/`` lose the prefix, links to other files of the repository become code.
- Pages that link to ``../README.md`` link to the home page.
- Two reference pages are made from the code itself: the command line (from the Typer
  application) and the MCP server's tools (from the server the CLI starts).
"""

from __future__ import annotations

import asyncio
import posixpath
import re
from pathlib import Path
from typing import Any

import typer.main
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Adds the pages made from the README and from the code."""
    made = {
        "index.md": home_page(),
        "reference/cli.md": cli_page(),
        "reference/mcp.md": mcp_page(),
    }
    for path, content in made.items():
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Points links at the README to the home page."""
    here = posixpath.dirname(page.file.src_uri)

    def relink(match: re.Match[str]) -> str:
        bang, text, target = match.groups()
        path, _, anchor = target.partition("#")
        if path.endswith("README.md") and not path.startswith(("http:", "https:")):
            resolved = posixpath.normpath(posixpath.join("docs", here, path))
            if resolved == "README.md":
                home = posixpath.relpath("index.md", here or ".")
                return f"{bang}[{text}]({home}{'#' + anchor if anchor else ''})"
        return match.group(0)

    return LINK.sub(relink, markdown)


def home_page() -> str:
    """The README with its links made relative to the site's root."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")

    def relink(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        if target.startswith(("http:", "https:", "mailto:", "#")):
            return match.group(0)
        if target.startswith("docs/"):
            return f"{bang}[{label}]({target.removeprefix('docs/')})"
        return f"{label} (`{target}` in the repository)"

    return LINK.sub(relink, text)


def _option_row(param: Any) -> str:
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    help_text = getattr(param, "help", None) or ""
    envvar = getattr(param, "envvar", None)
    if envvar:
        help_text += f" (environment: `{envvar}`)"
    default = param.default
    shown = "" if default is None or callable(default) or default == () else f"`{default}`"
    return f"| {names} | {' '.join(help_text.split())} | {shown} |"


def _command_section(name: str, command: Any) -> list[str]:
    lines = [f"## `timestone {name}`", ""]
    lines += [(command.help or "").strip(), ""]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    options = [p for p in command.params if p.param_type_name == "option"]
    if arguments:
        lines += ["| argument | meaning | required |", "|---|---|---|"]
        lines += [
            f"| `{str(p.name).upper()}` | {' '.join((getattr(p, 'help', None) or '').split())} "
            f"| {'yes' if p.required else 'no'} |"
            for p in arguments
        ]
        lines.append("")
    if options:
        lines += ["| option | meaning | default |", "|---|---|---|"]
        lines += [_option_row(p) for p in options]
        lines.append("")
    return lines


def _commands(group: Any, prefix: str = "") -> list[tuple[str, Any]]:
    # Typer carries a click of its own: the commands are read by their click interface
    found: list[tuple[str, Any]] = []
    context = group.context_class(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is None or command.hidden:
            continue
        if hasattr(command, "list_commands"):
            found += _commands(command, f"{prefix}{name} ")
        else:
            found.append((f"{prefix}{name}", command))
    return found


def cli_page() -> str:
    """Every command of ``timestone`` with its arguments and options."""
    from timestone.cli._app import app

    group = typer.main.get_command(app)
    lines = [
        "# Command line reference",
        "",
        "Made from the `timestone` command itself. How to run it, and the tasks it serves,",
        "are in [the command-line guide](../cli.md).",
        "",
    ]
    for name, command in _commands(group):
        lines += _command_section(name, command)
    return "\n".join(lines)


def mcp_page() -> str:
    """The MCP server's tools: name, what the model reads, and the arguments."""
    from timestone.mcp_server import build_server

    async def never() -> Any:
        raise RuntimeError("the reference page opens no memory")

    server = build_server(never, group_id=None)
    tools = asyncio.run(server.list_tools())
    lines = [
        "# MCP tools reference",
        "",
        "Made from the server that `timestone serve mcp` starts. How to run it is in",
        "[the command-line guide](../cli.md).",
        "",
    ]
    for tool in tools:
        lines += [f"## `{tool.name}`", "", (tool.description or "").strip(), ""]
        properties: dict[str, Any] = tool.input_schema.get("properties", {})
        required = set(tool.input_schema.get("required", []))
        if properties:
            lines += ["| argument | type | required |", "|---|---|---|"]
            for arg, schema in properties.items():
                kind = schema.get("type") or " or ".join(
                    str(s.get("type", "")) for s in schema.get("anyOf", [])
                )
                lines.append(f"| `{arg}` | {kind} | {'yes' if arg in required else 'no'} |")
            lines.append("")
    return "\n".join(lines)
