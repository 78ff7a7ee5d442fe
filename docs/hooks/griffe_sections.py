"""A griffe extension for the API reference: end a NumPy docstring section at a paragraph.

The docstrings of nonmarkov use NumPy's section layout (``Parameters`` over a
line of dashes, then ``name : type`` entries with indented continuations) and
often end a section with a plain paragraph after a blank line, e.g.

    Parameters
    ----------
    hamiltonian : callable t -> (d, d) Hermitian matrix.

    The callables are checked at t = 0 when the system is made.

griffe's NumPy parser ends a section only at the next section header, so it
would read that paragraph as more parameters. This extension starts a
``Notes`` section before such a paragraph: after a blank line inside an entry
section, an unindented line that is not an entry (``name``, ``name : text``,
``a, b : text``) is prose.

The text after ``name :`` is a description in these docstrings (shapes, units,
meaning), not a type, so it is moved to the entry's description (the type
column then shows the signature's annotation). The source docstrings are not
changed.
"""

from __future__ import annotations

import pathlib
import re
import sys
from typing import Any

from griffe import Extension, Object

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from markdown_text import escape_brackets, escape_indices

ENTRY_SECTIONS = {
    "parameters",
    "params",
    "other parameters",
    "returns",
    "yields",
    "receives",
    "raises",
    "warns",
    "attributes",
    "methods",
}
DASHES = re.compile(r"^-{3,}\s*$")
ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::\s*(.*))?$")
DESCRIBED = {"parameters", "params", "other parameters", "attributes", "returns", "yields"}


def close_sections(text: str) -> str:
    """``text`` with a ``Notes`` header before each paragraph that ends an entry section."""
    lines = text.split("\n")
    out: list[str] = []
    in_entries = described = False
    for k, line in enumerate(lines):
        following = lines[k + 1] if k + 1 < len(lines) else ""
        entry = ENTRY.match(line.strip()) if in_entries and not line.startswith(" ") else None
        if DASHES.match(following) and line.strip():  # a section header
            in_entries = line.strip().lower() in ENTRY_SECTIONS
            described = line.strip().lower() in DESCRIBED
        elif described and entry and entry.group(2):  # name : text -> name, then the text
            indent = line[: len(line) - len(line.lstrip())]
            out.extend([indent + entry.group(1), indent + "    " + entry.group(2)])
            continue
        elif (
            in_entries
            and line.strip()
            and not line.startswith(" ")
            and not DASHES.match(line)
            and out
            and not out[-1].strip()
            and not ENTRY.match(line.strip())
        ):
            out.extend(["Notes", "-----"])
            in_entries = False
        out.append(line)
    return "\n".join(out)


class CloseSectionsAtParagraphs(Extension):
    """Apply :func:`close_sections` and the site's text rules (``markdown_text``:
    brackets and indices stay text) to every docstring griffe loads."""

    def on_instance(self, *, node: Any, obj: Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = close_sections(obj.docstring.value)
            obj.docstring.value = escape_indices(escape_brackets(text))
