"""mkdocs hooks: run the tutorial scripts as Jupyter notebooks and render them
into their pages; keep the brackets of the text as text (``markdown_text``);
tidy the Sphinx roles of docstrings in the API reference.

A page that contains the line ``<!-- tutorial: NAME.py -->`` gets, in its
place, the source of ``docs/tutorials/NAME.py``, what the script printed, the
PNG figures it wrote (embedded in the page) and links to download the script
and the notebook ``NAME.ipynb``. Each script is turned into a notebook
(jupytext: its docstring a Markdown cell, its code in cells split at blank
lines) and the notebook is executed once, when the build starts, by a fresh
Python kernel inside its own temporary directory, two at a time: its printed
output and files are the page's, and the executed notebook, outputs and inline
figures included, is published next to the page. A cell that fails fails the
build with its traceback. ``NONMARKOV_DOCS_RUN_TUTORIALS=0`` skips running them
(the pages then show the source and say so, the notebooks have no outputs), for
a quick local preview.

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
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor

from mkdocs.exceptions import PluginError

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from markdown_text import escape_brackets

MARKER = re.compile(r"^<!-- tutorial: ([\w.-]+\.py) -->$", re.MULTILINE)
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|obj|exc|py:\w+):<code>(~?)([^<]*)</code>")
#: seconds a notebook cell may run
TIMEOUT_S = 300

_runs: dict[str, Future] = {}
_pool: ThreadPoolExecutor | None = None


def _tutorial_dir(config) -> pathlib.Path:
    return pathlib.Path(config["docs_dir"]) / "tutorials"


def _notebook(script: pathlib.Path):
    """The notebook of ``script`` (jupytext), its leading docstring a Markdown cell."""
    import jupytext
    import nbformat

    notebook = jupytext.read(script)
    if notebook.cells and notebook.cells[0].cell_type == "code":
        source = notebook.cells[0].source.strip()
        if source.startswith('"""') and source.endswith('"""') and source.count('"""') == 2:
            notebook.cells[0] = nbformat.v4.new_markdown_cell(source[3:-3].strip())
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    notebook.metadata.pop("jupytext", None)
    return notebook


def _run(script: pathlib.Path) -> tuple[str, list[tuple[str, bytes]], str]:
    """Execute the notebook of ``script`` in a temporary directory: what it printed,
    the PNG files it wrote and the executed notebook (JSON text)."""
    import nbclient
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    notebook = _notebook(script)
    env = dict(os.environ, NONMARKOV_PROGRESS="silent")
    env.pop("MPLBACKEND", None)  # the kernel's inline backend: figures in the notebook
    with tempfile.TemporaryDirectory(prefix="nonmarkov-tutorial-") as directory:
        client = nbclient.NotebookClient(
            notebook,
            timeout=TIMEOUT_S,
            kernel_name="python3",
            resources={"metadata": {"path": directory}},
        )
        try:
            client.execute(env=env)
        except CellTimeoutError as error:
            raise PluginError(
                f"tutorial {script.name}: a cell ran longer than {TIMEOUT_S} s"
            ) from error
        except CellExecutionError as error:
            raise PluginError(f"tutorial {script.name} failed:\n{str(error)[-4000:]}") from error
        figures = [
            (path.name, path.read_bytes()) for path in sorted(pathlib.Path(directory).glob("*.png"))
        ]
    printed = "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
    )
    return printed, figures, nbformat.writes(notebook)


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
        notebook = html.escape(_notebook_name(name))
        # the page is tutorials/NAME/ with directory URLs, tutorials/NAME.html without
        href = ("../" if config["use_directory_urls"] else "") + notebook
        parts = [
            f'```python title="{name}"\n{source}\n```',
            f"[Download {name}]({name}) and run it with `python {name}`, or download the "
            f'notebook <a href="{href}" download>{notebook}</a> (the same code, run by '
            "this build, with its output) and open it in Jupyter.",
        ]
        if _skip():
            parts.append("!!! note\n    Not run in this build (NONMARKOV_DOCS_RUN_TUTORIALS=0).")
            return "\n\n".join(parts)
        output, figures, _ = _runs[name].result()
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


def _notebook_name(script_name: str) -> str:
    return script_name.removesuffix(".py") + ".ipynb"


def on_post_build(config, **kwargs) -> None:
    """Publish each tutorial's notebook (executed, or without outputs when the
    tutorials were not run) next to its page."""
    global _pool
    import nbformat

    target = pathlib.Path(config["site_dir"]) / "tutorials"
    target.mkdir(parents=True, exist_ok=True)
    for script in sorted(_tutorial_dir(config).glob("*.py")):
        if script.name in _runs:
            text = _runs[script.name].result()[2]
        else:
            text = nbformat.writes(_notebook(script))
        (target / _notebook_name(script.name)).write_text(text, encoding="utf-8")
    if _pool is not None:
        _pool.shutdown(wait=True)
        _pool = None
