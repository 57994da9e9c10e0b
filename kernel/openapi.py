"""OpenAPI post-processing: every refusal is described as the problem+json it really is.

One exception handler (``kernel.problems``) turns every refusal into RFC 9457
``application/problem+json``; this hook says so in the schema, once, for every operation:
each 4xx/5xx response a view declares gets the ``Problem`` schema under that media type,
every operation that needs an API key also lists 401 and 429, which authentication and the
rate limit can answer on any of them, every operation lists 503 (the database can be lost
under any of them) and every operation that takes a body lists 413.
"""

from __future__ import annotations

from typing import Any

from kernel.problems import PROBLEM_CONTENT_TYPE, PROBLEMS

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details. Clients read `code`, never the texts.",
    "properties": {
        "type": {"type": "string", "description": "urn:plangate:problem:<code>"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "code": {"type": "string", "enum": sorted(PROBLEMS)},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "errors": {
            "type": "array",
            "description": "each field at fault; an empty path is the body itself",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "detail": {"type": "string"}},
                "required": ["path", "detail"],
            },
        },
    },
    "required": ["type", "title", "status", "code", "detail"],
}

_ALWAYS_POSSIBLE_WITH_A_KEY = {
    "401": "The API key is missing, unknown, revoked or expired (`invalid_api_key`).",
    "429": (
        "Rate limit of the API key, or of failed authentications from this address, reached "
        "(`throttled`); see Retry-After."
    ),
}
_ALWAYS_POSSIBLE = {
    "503": "The database cannot be reached (`database_unavailable`, see Retry-After), or no "
    "signing key is active (`no_signing_key`).",
}
_ALWAYS_POSSIBLE_WITH_A_BODY = {
    "413": "The body is larger than the server's limit (`payload_too_large`).",
}
_RETRY_AFTER = {
    "description": "seconds to wait before retrying, when the database cannot be reached",
    "schema": {"type": "integer", "minimum": 0},
}


def problem_responses(result: dict, generator, request, public) -> dict:
    """drf-spectacular POSTPROCESSING_HOOKS entry; see the module docstring."""
    result.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    content = {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            always = dict(_ALWAYS_POSSIBLE)
            if any("bearerAuth" in requirement for requirement in operation.get("security", [])):
                always |= _ALWAYS_POSSIBLE_WITH_A_KEY
            if "requestBody" in operation:
                always |= _ALWAYS_POSSIBLE_WITH_A_BODY
            for status, description in always.items():
                responses.setdefault(status, {"description": description})
            responses["503"].setdefault("headers", {"Retry-After": _RETRY_AFTER})
            for status, response in responses.items():
                if status.isdigit() and int(status) >= 400:
                    response["content"] = content
    return result
