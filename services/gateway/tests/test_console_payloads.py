"""The console's payloads: key/value tables a person reads, the raw JSON behind a toggle."""

from __future__ import annotations

import html
import json
import re

from disco_gateway.console.payloads import payload_html


def _raw(rendered: str) -> object:
    match = re.search(r"<pre>(.*)</pre>", rendered, re.DOTALL)
    assert match is not None
    return json.loads(html.unescape(match.group(1)))


def test_an_object_is_a_table_of_its_keys_with_its_json_behind_a_toggle() -> None:
    value = {"city": "Lisbon", "nights": 3, "direct": True, "note": None}

    rendered = str(payload_html(value))

    assert rendered.startswith('<div class="payload"><table class="kv">')
    assert "<tr><th>city</th><td>Lisbon</td></tr>" in rendered
    assert "<tr><th>nights</th><td>3</td></tr>" in rendered
    assert "<tr><th>direct</th><td>true</td></tr>" in rendered
    assert '<tr><th>note</th><td><span class="muted">—</span></td></tr>' in rendered
    assert '<details class="raw"><summary>JSON</summary>' in rendered
    assert _raw(rendered) == value


def test_nested_values_nest_lists_of_words_read_as_a_list_and_deep_ones_as_json() -> None:
    value = {"tools": ["weather", "book"], "a": {"b": {"c": {"d": 1}}}, "rows": [{"x": 1}]}

    rendered = str(payload_html(value))

    assert "<tr><th>tools</th><td>weather, book</td></tr>" in rendered
    assert '<tr><th>rows</th><td><table class="kv"><tr><th>1</th>' in rendered
    assert "<code>{&#34;d&#34;: 1}</code>" in rendered  # the fourth level, compact
    assert _raw(rendered) == value


def test_text_from_a_payload_is_escaped_everywhere() -> None:
    value = {"<script>": "<img src=x onerror=alert(1)>"}

    rendered = str(payload_html(value))

    assert "<script>" not in rendered
    assert "<img" not in rendered
    assert _raw(rendered) == value


def test_scalars_and_empty_values_show_as_such() -> None:
    assert str(payload_html("plain")).startswith('<div class="payload">plain<details')
    assert '<span class="muted">{}</span>' in str(payload_html({}))
    assert '<span class="muted">[]</span>' in str(payload_html([]))
