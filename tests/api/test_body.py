"""The door's JSON parser refuses every repeated key, whichever way it proves there is none.

``shoal.api.body.loads`` proves most bodies free of repeats by counting (C speed)
and checks the others key by key. Bodies here are written by hand from pairs, so a
repeat, a blank before a colon, an escape or a quote and a colon inside a string
can be anywhere.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.api import body

# A JSON value as written: objects are lists of pairs, so keys may repeat.
Pairs = tuple[str, list[tuple[str, Any]]]

_TEXT = st.text(alphabet=st.sampled_from(['a', 'b', '"', ':', '\\', ' ', 'é', '\n']), max_size=4)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _TEXT)


def _values(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.sampled_from(["a", "b", 'q":', "a:", "\\"])
    return st.one_of(
        st.lists(leaf, max_size=3),
        st.lists(st.tuples(keys, leaf), max_size=4).map(lambda pairs: ("object", pairs)),
    )


VALUES = st.recursive(_SCALARS, _values, max_leaves=12)


def _string(text: str, escape: bool) -> str:
    out = json.dumps(text, ensure_ascii=False)
    return out.replace("a", "\\u0061") if escape else out


def write(value: Any, blank: str, escape: bool) -> str:
    """``value`` as JSON text, with ``blank`` before every colon and some characters escaped."""
    if isinstance(value, tuple):
        pairs = value[1]
        inner = ",".join(
            f"{_string(k, escape)}{blank}:{write(v, blank, escape)}" for k, v in pairs
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(write(v, blank, escape) for v in value) + "]"
    if isinstance(value, str):
        return _string(value, escape)
    return json.dumps(value)


def repeats(value: Any) -> bool:
    if isinstance(value, tuple):
        keys = [k for k, _ in value[1]]
        return len(keys) != len(set(keys)) or any(repeats(v) for _, v in value[1])
    if isinstance(value, list):
        return any(repeats(v) for v in value)
    return False


@settings(max_examples=400, deadline=None)
@given(VALUES, st.sampled_from(["", " ", "\n\t"]), st.booleans())
def test_a_repeated_key_is_refused_and_nothing_else(value: Any, blank: str, escape: bool) -> None:
    raw = write(value, blank, escape).encode()
    if repeats(value):
        with pytest.raises(body.MalformedBody, match="duplicate key"):
            body.loads(raw)
    else:
        assert body.loads(raw) == orjson.loads(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"a":1}',
        b'{"x":{"a":{"b":1},"a":2}}',
        b'{"a":"\\":","a":1}',  # the dropped value held a quote and a colon
        b'{"a":1,"\\u0061":2}',  # the same key, once escaped
        b'{"a" :1,"a":1,"c":"x"}',  # a blank before one colon
        b'[{"k":[],"k":[]}]',
    ],
)
def test_repeats_that_a_count_could_miss_are_refused(raw: bytes) -> None:
    with pytest.raises(body.MalformedBody, match="duplicate key"):
        body.loads(raw)


def test_most_bodies_need_no_key_by_key_pass() -> None:
    """The bodies Shoal's own clients send (orjson, no blanks) are proved by the count."""
    app = {"metadata": {"name": "x", "labels": {"a": "b:c\":"}}, "spec": {"manifest": [{}]}}
    raw = orjson.dumps(app)
    assert body._no_key_lost(raw, orjson.loads(raw))
    spaced = json.dumps(app).encode()  # ", " and ": " after the colon: still counted
    assert body._no_key_lost(spaced, orjson.loads(spaced))


def test_a_body_orjson_wrote_is_proved_whatever_its_strings_hold() -> None:
    raw = orjson.dumps({"a": "\u0001 \" : \\u", "b": [{"c": 1.5}]})
    assert b"\\u" in raw  # orjson escapes control characters so
    assert body._no_key_lost(raw, orjson.loads(raw))
    assert not body._no_key_lost(b'{"a":1,"a":1}', {"a": 1})
