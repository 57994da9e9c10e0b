"""JSON written for people to read (admin pages, diffs), in one place: ``readable_json``
lays a value out, ``pretty_json`` and ``compact_json`` never raise on what an agent sent.

Pure Python, no Django: anything that shows JSON can use it.
"""

from __future__ import annotations

import json


def readable_json(value: object, *, width: int = 88, indent: int = 2) -> str:
    """JSON for people: a value that fits on its line stays on one line, longer ones are
    broken one member per line. ``{"tools": ["github_*"]}`` stays whole instead of taking
    three lines. Still valid JSON, key order kept."""

    def render(item: object, level: int, used: int) -> str:
        compact = json.dumps(item, ensure_ascii=False, separators=(", ", ": "))
        if (
            not isinstance(item, dict | list)
            or not item
            or level * indent + used + len(compact) <= width
        ):
            return compact
        inner = " " * ((level + 1) * indent)
        if isinstance(item, dict):
            members = []
            for key, member in item.items():
                label = json.dumps(str(key), ensure_ascii=False) + ": "
                members.append(inner + label + render(member, level + 1, len(label)))
            opening, closing = "{", "}"
        elif all(not isinstance(member, dict | list) for member in item):
            # A long list of scalars: as many to a line as fit.
            lines: list[list[str]] = [[]]
            for member in item:
                text = json.dumps(member, ensure_ascii=False)
                current = lines[-1]
                if current and len(inner) + len(", ".join([*current, text])) + 1 > width:
                    lines.append([])
                lines[-1].append(text)
            members = [inner + ", ".join(line) for line in lines]
            opening, closing = "[", "]"
        else:
            members = [inner + render(member, level + 1, 0) for member in item]
            opening, closing = "[", "]"
        return opening + "\n" + ",\n".join(members) + "\n" + " " * (level * indent) + closing

    return render(value, 0, 0)


def compact_json(value: object) -> str:
    """One line, keys sorted; ``repr`` for what JSON cannot hold, so a page never fails."""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def pretty_json(value: object) -> str:
    """``readable_json``, or ``repr`` for what JSON cannot hold, so a page never fails."""
    try:
        return readable_json(value)
    except (TypeError, ValueError):
        return repr(value)
