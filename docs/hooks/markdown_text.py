"""The site's rules for Markdown text: a ``<`` that does not open an HTML tag is
text, and so is the ``][`` of an index in a docstring.

The pages and docstrings write brackets of physics, <sigma_z>, <B(t_b) A(t_a)>,
|k><k|, which Markdown would pass on as (unknown) HTML tags and a browser would
then hide. ``escape_brackets`` turns every ``<`` outside code spans and fenced
code blocks into ``&lt;`` unless it opens a comment or one of the HTML tags in
``TAGS`` (written as a tag: the name, then a space, ``/`` or ``>``).
``escape_indices`` keeps ``D[k][a, b]`` in a docstring from being read as a
Markdown reference link (``[text][ref]``; the explicit cross-reference
``[name][]`` is kept).
"""

from __future__ import annotations

import re

TAGS = (
    "a|abbr|b|br|code|dd|details|div|dl|dt|em|figure|figcaption|h[1-6]|hr|i|img|kbd|li|ol|"
    "p|pre|small|span|strong|sub|summary|sup|table|tbody|td|th|thead|tr|u|ul"
)
KEEP = re.compile(rf"<(?:!--|/?(?:{TAGS})(?=[\s/>]))", re.IGNORECASE)
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
FENCE = re.compile(r"^\s*(```|~~~)")


INDEX = re.compile(r"\]\[(?!\])")


def _outside_code(markdown: str, escape) -> str:
    """``markdown`` with ``escape`` applied to the text outside code spans, fenced
    code blocks and doctest lines."""
    lines, fenced = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        if fenced or FENCE.match(line) or line.lstrip().startswith((">>>", "... ")):
            lines.append(line)
            continue
        pieces, start = [], 0
        for span in CODE_SPAN.finditer(line):
            pieces.append(escape(line[start : span.start()]))
            pieces.append(span.group(0))
            start = span.end()
        pieces.append(escape(line[start:]))
        lines.append("".join(pieces))
    return "\n".join(lines)


def _escape_text(text: str) -> str:
    out, start = [], 0
    for match in re.finditer("<", text):
        position = match.start()
        out.append(text[start:position])
        out.append("<" if KEEP.match(text, position) else "&lt;")
        start = position + 1
    out.append(text[start:])
    return "".join(out)


def escape_brackets(markdown: str) -> str:
    """``markdown`` with the ``<`` of text (not of tags, code or doctest lines) escaped."""
    return _outside_code(markdown, _escape_text)


def escape_indices(markdown: str) -> str:
    """``markdown`` with the ``][`` of indices outside code written ``]\\[``."""
    return _outside_code(markdown, lambda text: INDEX.sub("]\\\\[", text))
