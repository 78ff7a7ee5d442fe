"""mkdocs hooks: run the tutorial scripts and render them into their pages; keep
the brackets of the text as text (``markdown_text``); tidy the Sphinx roles of
docstrings in the API reference.

A page that contains the line ``<!-- tutorial: NAME.py -->`` gets, in its
place, the source of ``docs/tutorials/NAME.py``, what the script printed and
the PNG figures it wrote (embedded in the page). The scripts run when the
build starts, each in a fresh Python process inside its own temporary
directory, two at a time; a script that fails fails the build with its error
output. ``NONMARKOV_DOCS_RUN_TUTORIALS=0`` skips running them (the pages then
show the source and say so), for a quick local preview.

Docstrings use Sphinx roles (``:func:`nonmarkov.compute_dynamics```), which
Markdown renders as the role's name followed by code; the role names are
dropped (and a leading ``~`` shortens the name to its last part).
"""

from __future__ import annotations

import base64
import html
import os
import pathlib
import re
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor

from mkdocs.exceptions import PluginError

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from markdown_text import escape_brackets

MARKER = re.compile(r"^<!-- tutorial: ([\w.-]+\.py) -->$", re.MULTILINE)
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|obj|exc|py:\w+):<code>(~?)([^<]*)</code>")
TIMEOUT_S = 300

_runs: dict[str, Future] = {}
_pool: ThreadPoolExecutor | None = None


def _tutorial_dir(config) -> pathlib.Path:
    return pathlib.Path(config["docs_dir"]) / "tutorials"


def _run(script: pathlib.Path) -> tuple[str, list[tuple[str, bytes]]]:
    """Run ``script`` in a temporary directory: its output and the PNG files it wrote."""
    env = dict(os.environ, MPLBACKEND="Agg", NONMARKOV_PROGRESS="silent")
    with tempfile.TemporaryDirectory(prefix="nonmarkov-tutorial-") as directory:
        try:
            result = subprocess.run(
                [sys.executable, str(script.resolve())],
                cwd=directory,
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as error:
            raise PluginError(f"tutorial {script.name} ran longer than {TIMEOUT_S} s") from error
        if result.returncode != 0:
            raise PluginError(
                f"tutorial {script.name} failed (exit {result.returncode}):\n"
                + result.stderr[-4000:]
            )
        figures = [
            (path.name, path.read_bytes()) for path in sorted(pathlib.Path(directory).glob("*.png"))
        ]
    return result.stdout, figures


def _skip() -> bool:
    return os.environ.get("NONMARKOV_DOCS_RUN_TUTORIALS", "1").strip() == "0"


def on_pre_build(config, **kwargs) -> None:
    """Start every tutorial script (two at a time) while the rest of the site builds."""
    global _pool
    _runs.clear()
    if _skip():
        return
    _pool = ThreadPoolExecutor(max_workers=2)
    for script in sorted(_tutorial_dir(config).glob("*.py")):
        _runs[script.name] = _pool.submit(_run, script)


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    """Replace each tutorial marker by the script, its output and its figures."""

    def render(match: re.Match) -> str:
        name = match.group(1)
        script = _tutorial_dir(config) / name
        if not script.is_file():
            raise PluginError(f"{page.file.src_path} names a tutorial {name} that does not exist")
        source = script.read_text().rstrip()
        parts = [
            f'```python title="{name}"\n{source}\n```',
            f"[Download {name}]({name}) and run it with `python {name}`.",
        ]
        if _skip():
            parts.append("!!! note\n    Not run in this build (NONMARKOV_DOCS_RUN_TUTORIALS=0).")
            return "\n\n".join(parts)
        output, figures = _runs[name].result()
        parts.append(f"Output of `python {name}`:\n\n```text\n{output.rstrip()}\n```")
        for figure, data in figures:
            encoded = base64.b64encode(data).decode()
            parts.append(
                f'<img alt="{html.escape(figure)}, written by {html.escape(name)}" '
                f'src="data:image/png;base64,{encoded}">'
            )
        return "\n\n".join(parts)

    return MARKER.sub(render, escape_brackets(markdown))


def _shorten(match: re.Match) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def on_page_content(content: str, page, config, files, **kwargs) -> str:
    """Drop the Sphinx role names that docstrings carry into the rendered HTML."""
    return ROLE.sub(_shorten, content)


def on_post_build(config, **kwargs) -> None:
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=True)
        _pool = None
