"""What a record's chain hash covers: the one home of the hashed document.

``record_document`` is every field an auditor reads, under the names the records API
gives them (``GET /v1/audit/records``), with ``teamId`` for the team (its slug can be
renamed; its id cannot). ``record_hash`` is the lowercase hex SHA-256 of its RFC 8785
canonical JSON (``guard.canonical``), and ``prevHash`` inside it links each record to the
one before, so a record cannot be changed, removed or moved without breaking the hash of
its own or of the next.

An auditor holding an API record recomputes its hash without the server: drop ``id``,
``team``, ``hash`` and ``redacted`` (and ``format`` when it is 1), and hash the canonical
JSON of the rest (``teamId`` included).

``format`` is the version of this document. Records written before it was kept are format
1, whose hash covers no ``format``; records of format 2 and later carry it inside the hash,
so a reader knows which fields to expect before it recomputes one, and a later change of
the document is a new number rather than a silent difference.

A record the API marks ``redacted`` was emptied by retention (audit.retention): its content,
and so its hash, is gone; only its place in the chain can be checked.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from guard.canonical import canonical_json
from guard.utc import isoformat_z

from .models import AuditRecord

#: prev_hash of each team's first record
GENESIS_PREV_HASH = ""
#: the format new records are written in (AuditRecord.format's default)
RECORD_FORMAT = 2


def record_at(record: AuditRecord) -> str:
    """The record's time as the chain and the API write it: ISO 8601, UTC, microseconds."""
    return isoformat_z(record.at, timespec="microseconds")


def record_document(record: AuditRecord) -> dict[str, Any]:
    """The hashed document of a record (which must carry its ``seq`` and ``prev_hash``)."""
    document: dict[str, Any] = {} if record.format < 2 else {"format": record.format}
    return document | {
        "teamId": record.team_id,
        "seq": record.seq,
        "prevHash": record.prev_hash,
        "at": record_at(record),
        "kind": record.kind,
        "actor": record.actor,
        "agent": (
            None if record.agent_id is None else {"id": record.agent_id, "name": record.agent_name}
        ),
        "user": record.user,
        "planId": record.plan_id,
        "planHash": record.plan_hash,
        "policy": (
            None
            if not record.policy and record.policy_version is None
            else {"id": record.policy, "version": record.policy_version}
        ),
        "code": record.code,
        "rule": record.rule,
        "details": record.details,
    }


def record_canonical(record: AuditRecord) -> bytes:
    """The bytes ``record_hash`` hashes: RFC 8785 canonical JSON of ``record_document``.

    JSON that RFC 8785 cannot write (an integer beyond 2**53 or a float that is not finite,
    in ``details`` or ``rule`` as some door stored them) must not stop the sealer forever:
    those two fields are then hashed as their sorted, ASCII-escaped ``json.dumps`` text,
    which is as deterministic for a given stored value.
    """
    document = record_document(record)
    try:
        return canonical_json(document)
    except (TypeError, ValueError, OverflowError):
        for name in ("rule", "details"):
            document[name] = json.dumps(document[name], sort_keys=True, ensure_ascii=True)
        return canonical_json(document)


def record_hash(record: AuditRecord) -> str:
    return hashlib.sha256(record_canonical(record)).hexdigest()
