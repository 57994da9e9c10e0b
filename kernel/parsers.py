"""The API's JSON parser: DRF's, plus two refusals that keep bad bodies away from a 500.

- A body nested too deeply: Python's JSON decoder recurses once per level and raises
  RecursionError (not ValueError, the only error DRF's parser catches) past the
  interpreter's limit, so ``[[[[...]]]]`` 5,000 levels deep used to end in a 500.
- Text holding NUL (``\\u0000``), anywhere in the body: PostgreSQL cannot store it in a
  text or jsonb column, so a plan, a refresh token or a guard event carrying it would fail
  on the database. It is refused on every database, naming each path that holds it.
"""

from __future__ import annotations

from collections.abc import Iterator

from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json

from guard.errors import FieldError, index_path, key_path  # the paths the guard's errors use
from kernel.problems import Code, DomainError


def _nul_paths(value: object, path: str) -> Iterator[str]:
    """Paths (``plan.steps[0].args``) of the strings and keys that hold a NUL character."""
    if isinstance(value, str):
        if "\x00" in value:
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            item_path = key_path(path, key)
            if "\x00" in key:
                yield item_path
            else:
                yield from _nul_paths(item, item_path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nul_paths(item, index_path(path, index))


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding)
            data = json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply") from None
        # JSON cannot hold a raw NUL inside a string, only the escape: most bodies skip the walk.
        if "\\u0000" in text:
            paths = list(_nul_paths(data, ""))
            if paths:
                raise DomainError(
                    Code.INVALID_REQUEST,
                    "Text in the body must not contain NUL (\\u0000) characters.",
                    errors=[FieldError(path, "must not contain NUL (\\u0000)") for path in paths],
                )
        return data
