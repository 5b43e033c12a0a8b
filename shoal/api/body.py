"""The one parser of request bodies: strict JSON, parsed once, shared by the guard and routes.

Two parsers that disagree let a body mean one thing to the check and another
to the handler (``{"items": NaN, "items": [...]}``). So every body is parsed
here, once: orjson refuses NaN, Infinity and broken UTF-8; the standard
library's scanner then refuses duplicate keys, which orjson would silently
resolve. The value is kept in the ASGI scope, so the guard authorises exactly
what the handler acts on.

The standard library's pass calls Python for every object: 8 µs for an
application, 15 µs per binding of the scheduler's batches (``bench/door.py``).
Most bodies are proved free of repeated keys at C speed instead
(``_no_key_lost``): 1 and 2 µs.
"""

from __future__ import annotations

import json
import re
from collections.abc import MutableMapping
from typing import Any

import orjson

SCOPE_KEY = "shoal.body"


class MalformedBody(ValueError):
    """The body is not strict JSON; the message says why."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise MalformedBody(f"duplicate key {key!r}")
            seen.add(key)
    return mapping


_DECODER = json.JSONDecoder(object_pairs_hook=_unique)
_BLANK_BEFORE_COLON = re.compile(rb'"[ \t\n\r]+:')


def _no_key_lost(raw: bytes, value: Any) -> bool:
    """Whether parsing ``raw`` into ``value`` provably dropped no repeated key.

    Written back by orjson, ``value`` has no repeat. When that is ``raw`` byte for
    byte (Shoal's own clients write with orjson), ``raw`` has none either.
    Otherwise count: with no ``\\u`` escape and no blank between a closing quote
    and a colon, every ``":`` in ``raw`` ends a key or is a quote and a colon
    inside a string (written ``\\":``). orjson writes the same, so its count is
    lower by one for each key (and everything inside it) that a repeat dropped.
    Equal counts: nothing was dropped. With escapes or blanks, the caller checks
    key by key.
    """
    again = orjson.dumps(value)
    if again == raw:
        return True
    if b"\\u" in raw or _BLANK_BEFORE_COLON.search(raw):
        return False
    return raw.count(b'":') == again.count(b'":')


MAX_DEPTH = 128
"""Arrays and objects nested deeper are refused. Whatever the API stores or sends is written
by orjson, which writes at most 254 levels: an object keeps to that with its wrappers
(a stored object's fields, a list, a watch event) around a body of ``MAX_DEPTH``."""
_ORJSON_DEPTH = 254
_PADDING = _ORJSON_DEPTH - MAX_DEPTH


def _within_depth(raw: bytes, value: Any) -> bool:
    """Whether ``value`` nests at most ``MAX_DEPTH`` arrays and objects.

    Only a body with more openers than that can be deeper (two counts at C speed). Then
    orjson writes it inside ``_PADDING`` more levels: it refuses beyond its own limit.
    """
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return True
    for _ in range(_PADDING):
        value = [value]
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


def loads(raw: bytes) -> Any:
    """``raw`` as JSON, refusing NaN, Infinity, broken UTF-8, duplicate keys and nesting
    deeper than ``MAX_DEPTH``."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        if str(error).startswith("depth limit exceeded"):
            raise MalformedBody(f"nested deeper than {MAX_DEPTH} arrays and objects") from None
        raise MalformedBody(str(error)) from None
    if not _within_depth(raw, value):
        raise MalformedBody(f"nested deeper than {MAX_DEPTH} arrays and objects")
    if isinstance(value, dict | list) and raw.count(b":") > 1 and not _no_key_lost(raw, value):
        _DECODER.decode(raw.decode())  # only to refuse duplicate keys
    return value


def parsed(scope: MutableMapping[str, Any], raw: bytes) -> Any:
    """The request's body as parsed at the door, or parsed now (and kept) if not yet."""
    if SCOPE_KEY not in scope:
        scope[SCOPE_KEY] = loads(raw)
    return scope[SCOPE_KEY]


def replace(scope: MutableMapping[str, Any], value: Any) -> bytes:
    """Make ``value`` the request's body (the guard's per-item filtering); its bytes."""
    scope[SCOPE_KEY] = value
    return orjson.dumps(value)
