"""Escaping by where a value lands: text shows invisible characters marked, an attribute keeps
the exact value (a form posts back what the run holds)."""

from __future__ import annotations

from ui_support import PageParts

from harness.ui.markup import html


def test_a_value_in_an_attribute_stays_exact_and_the_same_value_in_text_is_marked():
    out = html('<p title="{}" data-x=\'{}\'>{}</p>', "call_\u200b2", "a'b\u202e", "call_\u200b2")
    parts = PageParts(out)
    assert parts.tags[0] == ("p", {"title": "call_\u200b2", "data-x": "a'b\u202e"})
    assert "".join(parts.text) == "call_\\u200b2"
    assert out.count("<span") == 1


def test_quotes_in_text_are_not_taken_for_an_attribute():
    out = html('<p>with the reason "{}" by {}</p>', "x\u200b", '<b title="y">')
    assert "".join(PageParts(out).text) == 'with the reason "x\\u200b" by <b title="y">'
    assert [t for t, _ in PageParts(out).tags] == ["p", "span"]


def test_a_lone_surrogate_is_shown_in_text_and_replaced_in_an_attribute_so_the_page_encodes():
    out = html('<p title="{}">{}</p>', "a\ud800", "b\udfff")
    out.encode("utf-8")  # a response body must be UTF-8
    parts = PageParts(out)
    assert parts.tags[0][1]["title"] == "a\ufffd" and "".join(parts.text) == "b\\udfff"
