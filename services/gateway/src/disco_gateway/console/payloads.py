"""Payloads as a person reads them: key/value tables, the raw JSON behind a toggle.

The console's templates use it as the ``payload`` filter; the session view's
script (``static/session.js``) renders the events it receives the same way.
"""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup, escape

__all__ = ["payload_html"]

_DEPTH = 3
"""Below this many levels of nesting a value is shown as compact JSON."""


def payload_html(value: Any) -> Markup:
    """``value`` (JSON) as a key/value table, with its raw JSON behind a ``<details>``."""
    raw = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return Markup(
        '<div class="payload">{}<details class="raw"><summary>JSON</summary><pre>{}</pre>'
        "</details></div>"
    ).format(_kv(value, 0), raw)


def _kv(value: Any, depth: int) -> Markup:
    if isinstance(value, dict):
        rows = [(str(key), item) for key, item in value.items()]
    elif isinstance(value, list):
        if all(not isinstance(item, dict | list) for item in value):
            return escape(", ".join(_text(item) for item in value)) if value else _muted("[]")
        rows = [(str(index), item) for index, item in enumerate(value, start=1)]
    elif value is None:
        return _muted("—")
    else:
        return escape(_text(value))
    if not rows:
        return _muted("{}")
    if depth >= _DEPTH:
        return Markup("<code>{}</code>").format(json.dumps(value, ensure_ascii=False, default=str))
    cells = Markup("").join(
        Markup("<tr><th>{}</th><td>{}</td></tr>").format(key, _kv(item, depth + 1))
        for key, item in rows
    )
    return Markup('<table class="kv">{}</table>').format(cells)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _muted(text: str) -> Markup:
    return Markup('<span class="muted">{}</span>').format(text)
