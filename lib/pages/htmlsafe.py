"""The one way data goes into a page (the report, the item browser, the docs site).

Datasets come from other people (imported CSVs, hub datasets, paper releases) and answers from
models, so any text of a run may be hostile. Pages take it only through these functions:

    text(value)            # HTML text and quoted attribute values: & < > " ' escaped
    href(url)              # a link target: relative paths and http(s) only, escaped for an attribute
    json_block(id, value)  # data for a script: <script type="application/json">, read with JSON.parse
    csp_meta(scripts=...)  # the Content-Security-Policy meta tag: only the page's own script files run
    md_cell(value)         # a markdown table cell (the docs hook): HTML escaped, pipes and newlines kept out

``json_block`` escapes ``<``, ``>``, ``&`` and U+2028/9 as ``\\u003c``... (still valid JSON, so
``JSON.parse`` reads back the same value), so a ``</script>`` inside the data cannot close the block.
The Content-Security-Policy is the second wall: a page's scripts come only from files beside it
(never inline, never an ``on...=`` attribute), so an escape missed somewhere still cannot run.
Scripts build their DOM with ``textContent``, never ``innerHTML``.
"""

from __future__ import annotations

import html
import json
import re
from urllib.parse import urlsplit

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_UNSAFE = re.compile("[<>&\u2028\u2029]")


def text(value) -> str:
    """``value`` as HTML text or as the value of a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def json_text(value) -> str:
    """``value`` as JSON that is safe anywhere in an HTML document (no ``<``, ``>``, ``&``, U+2028/9)."""
    return _JSON_UNSAFE.sub(
        lambda m: _JSON_ESCAPES[m.group()], json.dumps(value, ensure_ascii=False)
    )


def json_block(element_id: str, value) -> str:
    """A ``<script type="application/json">`` holding ``value``; the page reads it with
    ``JSON.parse(document.getElementById(element_id).textContent)``. It is data, never run."""
    return f'<script type="application/json" id="{text(element_id)}">{json_text(value)}</script>'


def href(url: str) -> str:
    """``url`` for an ``href``/``src`` attribute: a relative link (a path, a ``#fragment``, a
    ``?query``) or an ``http(s)`` address. Any other scheme (``javascript:``, ``data:``...) raises."""
    url = str(url)
    parts = urlsplit(url.strip())
    if parts.scheme and parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"not a link a page may hold (relative or http(s) only): {url[:80]!r}")
    if not parts.scheme and url.strip().startswith("//"):
        raise ValueError(f"not a link a page may hold (a scheme-relative address): {url[:80]!r}")
    return text(url)


def csp_meta(scripts: bool = False, images: str = "'self' data:") -> str:
    """The page's Content-Security-Policy as a meta tag: nothing loads but its own style, images
    (``images``) and, with ``scripts``, script files from beside it (``'self'``; on ``file://``
    Chromium counts the page's folder as its own). No inline script, no ``on...`` attributes."""
    script_src = "'self'" if scripts else "'none'"
    policy = (
        f"default-src 'none'; script-src {script_src}; style-src 'unsafe-inline'; img-src {images}; "
        f"base-uri 'none'; form-action 'none'; object-src 'none'"
    )
    return f'<meta http-equiv="Content-Security-Policy" content="{text(policy)}">'


def md_cell(value) -> str:
    """``value`` as a markdown table cell: raw HTML escaped (markdown passes it through), ``|`` and
    newlines kept from breaking the row."""
    return text(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")
