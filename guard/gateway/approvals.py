"""A plan awaiting a person's approval, told to the client in its protocol's own shape, and
the denial envelope of a blocked call.

A ``declare_plan`` call whose plan a policy sent to a person waits for the decision in a
worker thread (guard.gateway.relay). Where the client can open a page for its user, the
gateway points it at the approval page as soon as the plan awaits approval:

* MCP 2026-07-28 (the request's ``_meta`` names the protocol version, and its client
  capabilities list URL elicitation): the call is answered at once with an
  ``InputRequiredResult`` holding a URL-mode ``elicitation/create`` and a ``requestState``;
  the client retries the call once its user was there, and the retry is answered with the
  declaration's own answer (the plan once approved), waiting for it as today (whether the
  user opened the page or not: the person may decide all the same).
* MCP 2025-11-25 (the client's ``initialize`` capabilities list URL elicitation): the
  gateway sends the client an ``elicitation/create`` request in URL mode, then answers the
  call when the person decided, followed by ``notifications/elicitation/complete``. Its
  request ids are strings in a namespace of the gateway's (``plangate-elicitation-N``),
  and the client's answer to one is consumed here, never relayed to the server.

Any other client waits as before. Nothing here decides: the plan is declared, and its
calls decided, by the guard alone.
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final, Literal, Protocol

import anyio
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from guard.agent.outcomes import (
    AUTHORIZATION_META_KEY,
    INSUFFICIENT_AUTHORIZATION,
    URL_HINT,
    authorization_denial,
)
from guard.agent.session import CallDecision
from guard.agent.status import GuardStatus
from guard.decisions import Decision

__all__ = [
    "ELICIT",
    "INPUT_REQUIRED",
    "ApprovalPrompts",
    "Declaration",
    "approval_url",
    "call_denial",
]

# How a client is pointed at the approval page (None: it is not; it waits as before).
INPUT_REQUIRED: Final = "input_required"  # 2026-07-28: InputRequiredResult, then a retry
ELICIT: Final = "elicit"  # 2025-11-25: an elicitation/create request of the gateway's
Prompt = Literal["input_required", "elicit"]

# The gateway's own request ids: strings, which no client's numbering reaches.
_REQUEST_ID_PREFIX: Final = "plangate-elicitation-"
# Declarations a 2026-07-28 client may retry (newest kept): each ends with its thread.
_MAX_RESUMABLE: Final = 64
_INPUT_KEY: Final = "plangate_approval"
_MESSAGE: Final = (
    "A person must approve the agent's plan before any of its tools run. Open the page to"
    " review it; the agent goes on once it is decided."
)


class StatusGuard(Protocol):
    def status(self) -> GuardStatus: ...


class DeclaringGuard(StatusGuard, Protocol):
    def wait_for_declaration(self, timeout: float | None = None) -> bool: ...


def call_denial(
    guard: StatusGuard, decision: CallDecision, tool: object, arguments: object
) -> dict[str, Any] | None:
    """The SEP-2643 envelope of a blocked call (`authorization_denial`), with the plan it
    was decided under and, while a plan awaits approval, its approval page."""
    if decision.allowed or decision.code is Decision.INVALID_ARGUMENTS:
        return None
    status = guard.status()
    return authorization_denial(
        decision,
        tool=tool,
        arguments=arguments,
        plan_id=status.plan_id,
        approval_url=status.approval_url,
    )


def url_elicitation(capabilities: object) -> bool:
    """Whether client capabilities (``initialize``'s, or a 2026-07-28 request's) list
    URL-mode elicitation (``elicitation.url``)."""
    if not isinstance(capabilities, Mapping):
        return False
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, Mapping) and isinstance(elicitation.get("url"), Mapping)


class Declaration:
    """One ``declare_plan`` running in a worker thread: its answer, once it returned."""

    __slots__ = ("answer", "done")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.answer: dict[str, Any] = {}

    def finish(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.done.set()


async def approval_url(guard: DeclaringGuard, declaration: Declaration) -> str | None:
    """The approval page of the plan `declaration` declares on `guard`, as soon as it awaits
    a person's approval; None once the declaration returned without (or with no page)."""
    while not declaration.done.is_set():
        settled = await anyio.to_thread.run_sync(guard.wait_for_declaration, abandon_on_cancel=True)
        status = guard.status()
        if status.state == "awaiting_approval":
            return status.approval_url
        if settled:  # nothing awaits approval: the declaration is returning
            await declaration.done.wait()
    return None


class ApprovalPrompts:
    """One client's side of approval prompts: what it said it supports, the requests the
    gateway sent it, and the declarations it may retry."""

    def __init__(self) -> None:
        self._elicits = False  # the client's initialize listed URL elicitation
        self._ids = itertools.count(1)
        self._asked: set[str] = set()
        self._resumable: OrderedDict[str, Declaration] = OrderedDict()

    def initialized(self, params: Mapping[str, Any]) -> None:
        """Reads the client's ``initialize`` request."""
        self._elicits = url_elicitation(params.get("capabilities"))

    def prompt(self, params: Mapping[str, Any], *, modern: bool) -> Prompt | None:
        """How the client of this ``tools/call`` can be pointed at an approval page."""
        if modern:
            meta = params.get("_meta")
            capabilities = (
                meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
            )
            return INPUT_REQUIRED if url_elicitation(capabilities) else None
        return ELICIT if self._elicits else None

    # --- 2026-07-28 -------------------------------------------------------------------

    def input_required(self, url: str, declaration: Declaration) -> dict[str, Any]:
        """The ``InputRequiredResult`` pointing at `url`; its ``requestState`` names
        `declaration` for the retry, and its ``_meta`` holds SEP-2643's envelope with the
        page as its ``url`` hint."""
        state = secrets.token_urlsafe(24)
        self._resumable[state] = declaration
        while len(self._resumable) > _MAX_RESUMABLE:
            self._resumable.popitem(last=False)
        return {
            "resultType": "input_required",
            "inputRequests": {
                _INPUT_KEY: {
                    "method": "elicitation/create",
                    "params": {"mode": "url", "message": _MESSAGE, "url": url},
                }
            },
            "requestState": state,
            # SEP-2643's composition with URL elicitation: the same page, as the denial's hint.
            "_meta": {
                AUTHORIZATION_META_KEY: {
                    "reason": INSUFFICIENT_AUTHORIZATION,
                    "remediation": "available",
                    "remediationHints": [{"type": URL_HINT, "url": url}],
                }
            },
        }

    def resumed(self, params: Mapping[str, Any]) -> Declaration | None:
        """The declaration a retried ``declare_plan`` call's ``requestState`` names (once)."""
        state = params.get("requestState")
        if not isinstance(state, str):
            return None
        return self._resumable.pop(state, None)

    # --- 2025-11-25 -------------------------------------------------------------------

    def elicitation(self, url: str) -> tuple[JSONRPCRequest, str]:
        """The gateway's ``elicitation/create`` request in URL mode, and its elicitation
        id (for ``notifications/elicitation/complete``)."""
        request_id = f"{_REQUEST_ID_PREFIX}{next(self._ids)}"
        self._asked.add(request_id)
        elicitation_id = secrets.token_urlsafe(16)
        params = {"mode": "url", "message": _MESSAGE, "url": url, "elicitationId": elicitation_id}
        request = JSONRPCRequest(
            jsonrpc="2.0", id=request_id, method="elicitation/create", params=params
        )
        return request, elicitation_id

    @staticmethod
    def completed(elicitation_id: str) -> JSONRPCNotification:
        return JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/elicitation/complete",
            params={"elicitationId": elicitation_id},
        )

    def consumes(self, message: JSONRPCMessage) -> bool:
        """Whether `message` is the client's answer to a request of the gateway's (then it
        is consumed: the server never sent that request)."""
        if not isinstance(message, JSONRPCResponse | JSONRPCError):
            return False
        if not isinstance(message.id, str) or message.id not in self._asked:
            return False
        self._asked.discard(message.id)
        return True
