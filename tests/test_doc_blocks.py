"""The Python code blocks of README.md and docs/*.md run as written.

Each page's ```` ```python ```` blocks run in order as one script, in a fresh
Python process inside a temporary directory that holds a copy of ``examples/``
(the pages speak from the repository's root), with the ``nonmarkov`` command on
the ``PATH``, on the session's backend (so the CI runs them once per backend).
A block just below an HTML comment that contains the word ``skip``
(``<!-- skip: needs a cluster -->``) is left out; :func:`test_skipped_blocks_say_why`
keeps such comments explained.
Pages without Python blocks are not collected.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from nonmarkov import backends

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
SKIP = re.compile(r"<!--[^>]*\bskip\b[^>]*-->\s*$", re.IGNORECASE)
#: seconds a page may take (each page is a few seconds; this only stops a hang)
TIMEOUT_S = 300


def python_blocks(text: str) -> tuple[list[str], list[str]]:
    """The Python blocks of a Markdown ``text`` to run, and the skip comments of the others."""
    run, skipped = [], []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n")
        previous = before.rsplit("\n", 1)[-1]
        comment = SKIP.search(previous)
        if comment:
            skipped.append(comment.group(0))
        else:
            run.append(match.group(1))
    return run, skipped


def _pages_with_blocks() -> list[pathlib.Path]:
    return [page for page in PAGES if python_blocks(page.read_text(encoding="utf-8"))[0]]


@pytest.mark.slow  # a fresh Python per page: seconds each, a minute or two in all
@pytest.mark.parametrize("page", _pages_with_blocks(), ids=lambda page: page.name)
def test_page_blocks_run(page: pathlib.Path, tmp_path: pathlib.Path) -> None:
    blocks, _ = python_blocks(page.read_text(encoding="utf-8"))
    script = "\n\n".join(blocks)
    (tmp_path / "page.py").write_text(script, encoding="utf-8")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = dict(os.environ)
    scripts = os.path.dirname(sys.executable)  # where `nonmarkov` is installed
    env["PATH"] = scripts + os.pathsep + env.get("PATH", "")
    env.update(
        NONMARKOV_BACKEND=backends.get_backend(),
        NONMARKOV_PRECISION=backends.get_precision(),
        NONMARKOV_PROGRESS="silent",
        MPLBACKEND="Agg",
    )
    result = subprocess.run(
        [sys.executable, "page.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 0, (
        f"the Python blocks of {page.relative_to(ROOT)} fail when run in order "
        f"(exit {result.returncode}):\n{result.stderr[-3000:]}"
    )


def test_skipped_blocks_say_why() -> None:
    """A skipped block's comment gives a reason (``<!-- skip: why -->``)."""
    for page in PAGES:
        _, skipped = python_blocks(page.read_text(encoding="utf-8"))
        for comment in skipped:
            reason = re.sub(r"<!--|-->|\bskip\b|:", "", comment, flags=re.IGNORECASE).strip()
            assert reason, f"{page.name}: {comment} gives no reason for skipping its block"


def test_the_block_finder_honours_skip_comments() -> None:
    text = (
        "a\n\n```python\nx = 1\n```\n\n<!-- skip: needs a cluster -->\n```python\ny = 2\n```\n"
        "\n```bash\nls\n```\n```python title='t'\nz = 3\n```\n"
    )
    run, skipped = python_blocks(text)
    assert run == ["x = 1\n", "z = 3\n"]
    assert skipped == ["<!-- skip: needs a cluster -->"]
