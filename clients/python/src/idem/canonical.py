"""Canonical JSON (RFC 8785, JCS), fingerprints and derived keys, exactly as the server makes them.

The recipe (docs/concepts.md, "Keys and fingerprints: the recipe"):

    fingerprint = hex(SHA-256(tool + "\\n" + JCS(args without the tool's ignore_fields)))
    derived key = "run:" + run_id + ":step:" + step + ":" + fingerprint
                      when run_id is 1-128 printable ASCII characters, else
                  "run-sha256:" + hex(SHA-256(run_id)) + ":step:" + step + ":" + fingerprint

Every JSON number is an IEEE 754 double, as in JavaScript: integers beyond 2**53 lose
precision by design of JCS. Send big integers as strings when they must stay exact.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Iterable

__all__ = ["canonical_json", "fingerprint", "derived_key", "MAX_VERBATIM_RUN_ID_LEN"]

#: The longest run id a derived key keeps as it is; longer ones are hashed.
MAX_VERBATIM_RUN_ID_LEN = 128

_SAFE_INTEGER = 2**53


def canonical_json(value: Any) -> str:
    """The RFC 8785 canonical form of `value` (dicts, lists, str, int, float, bool, None)."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        out.append(str(value) if abs(value) <= _SAFE_INTEGER else _number(float(value)))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, dict):
        for name in value:
            if not isinstance(name, str):
                raise TypeError(f"JSON object member names are strings, not {type(name).__name__}")
        # Members sort by their names as UTF-16 code units (RFC 8785 section 3.2.3), which
        # big-endian UTF-16 bytes compare alike.
        names = sorted(value, key=lambda name: name.encode("utf-16-be", "surrogatepass"))
        out.append("{")
        for index, name in enumerate(names):
            if index:
                out.append(",")
            out.append(_string(name))
            out.append(":")
            _write(value[name], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


def _string(text: str) -> str:
    # json.dumps without ensure_ascii escapes exactly what JCS escapes: quote, backslash and
    # the controls below U+0020 (short forms for \b \t \n \f \r, lowercase \u00xx otherwise).
    return json.dumps(text, ensure_ascii=False)


def _number(value: float) -> str:
    """ECMAScript's Number.prototype.toString of `value`."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError("JSON has no NaN or Infinity")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that round-trip, as ECMAScript does; only the layout differs.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    stripped = all_digits.lstrip("0")
    point = len(whole) + int(exponent or 0) - (len(all_digits) - len(stripped))
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp = ("+" if e >= 0 else "-") + str(abs(e))
        text = digits + "e" + exp if k == 1 else digits[0] + "." + digits[1:] + "e" + exp
    return sign + text


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _remove_path(value: Any, path: str) -> None:
    """Removes the member at a dotted path through objects, in every object of nested arrays."""
    first, dot, rest = path.partition(".")
    if isinstance(value, list):
        for item in value:
            _remove_path(item, path)
    elif isinstance(value, dict):
        if not dot:
            value.pop(first, None)
        elif first in value:
            _remove_path(value[first], rest)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {name: _copy(member) for name, member in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(item) for item in value]
    return value


def fingerprint(tool: str, args: Any, ignore_fields: Iterable[str] = ()) -> str:
    """SHA-256 (lowercase hex) of the tool name, a newline, and JCS of `args` minus `ignore_fields`."""
    kept = _copy(args)
    for path in ignore_fields:
        _remove_path(kept, path)
    return _sha256_hex(tool + "\n" + canonical_json(kept))


def _is_key_char(char: str) -> bool:
    return " " <= char <= "~"


def derived_key(
    run_id: str, step: int, tool: str, args: Any, ignore_fields: Iterable[str] = ()
) -> str:
    """The key the server derives for `tool` with `args` at `step` of run `run_id`."""
    digest = fingerprint(tool, args, ignore_fields)
    verbatim = 1 <= len(run_id) <= MAX_VERBATIM_RUN_ID_LEN and all(map(_is_key_char, run_id))
    if verbatim:
        return f"run:{run_id}:step:{step}:{digest}"
    return f"run-sha256:{_sha256_hex(run_id)}:step:{step}:{digest}"
