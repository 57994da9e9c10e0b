"""An HTTP shim between the MCP conformance suite and `plangate-mcp serve`: the suite knows
neither a bearer credential nor ``declare_plan``, so this relays its requests to the gateway
unchanged (Host and Origin included, responses and SSE streams streamed back as they come)
and adds two things only:

- ``Authorization: Bearer <PLANGATE_GATEWAY_CREDENTIAL>`` on every request (a Host or
  Origin naming this shim is rewritten to name the gateway; any other is left as sent, so
  the suite's DNS-rebinding probe reaches the gateway as it was made);
- right after a session's ``notifications/initialized`` has been accepted, one
  ``tools/call declare_plan`` of its own on that session, with the plan in PLAN_FILE; the
  client's 202 is held until the answer has come, so the client's next request meets a
  declared plan. Each answer is appended to LOG_FILE as a JSON line.

    python conformance_proxy.py PORT GATEWAY_URL PLAN_FILE LOG_FILE
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

# Hop-by-hop headers, and the length the relay recomputes: never copied across.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
}
DECLARE_ID = "conformance-proxy-declare"


def _declaration_answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer to our declare_plan, from a JSON body or an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():  # not a priming event
                message = json.loads(line[5:])
                if isinstance(message, dict) and message.get("id") == DECLARE_ID:
                    return message
        return {"error": f"no answer in the stream: {response.text[:500]}"}
    return response.json()


def application(
    port: int, gateway_url: str, plan: dict[str, Any], log: Path, credential: str
) -> Starlette:
    client = httpx.AsyncClient(timeout=httpx.Timeout(60, read=None))
    bearer = f"Bearer {credential}"
    gateway_port = httpx.URL(gateway_url).port

    def retarget(name: str, value: str) -> str:
        """A Host or Origin naming this shim, made to name the gateway."""
        if name in ("host", "origin") and value.endswith(f":{port}"):
            for local in ("localhost", "127.0.0.1"):
                if value.removeprefix("http://") == f"{local}:{port}":
                    return value.removesuffix(f":{port}") + f":{gateway_port}"
        return value

    async def declare(request: Request) -> None:
        headers = {
            "authorization": bearer,
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        for name in ("mcp-session-id", "mcp-protocol-version", "host", "origin"):
            if name in request.headers:
                headers[name] = retarget(name, request.headers[name])
        call = {
            "jsonrpc": "2.0",
            "id": DECLARE_ID,
            "method": "tools/call",
            "params": {"name": "declare_plan", "arguments": plan},
        }
        response = await client.post(gateway_url, json=call, headers=headers)
        answer = _declaration_answer(response)
        with log.open("a") as out:
            out.write(json.dumps({"status": response.status_code, "answer": answer}) + "\n")

    async def relay(request: Request) -> Response:
        body = await request.body()
        headers = [
            (name, retarget(name, value))
            for name, value in request.headers.items()
            if name.lower() not in HOP_BY_HOP and name.lower() != "authorization"
        ]
        headers.append(("authorization", bearer))
        upstream = client.build_request(
            request.method, gateway_url, headers=headers, content=body, params=request.query_params
        )
        response = await client.send(upstream, stream=True)
        headers = {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}
        if request.method == "POST" and response.is_success and _is_initialized(body):
            content = await response.aread()
            await response.aclose()
            await declare(request)
            return Response(content, status_code=response.status_code, headers=headers)
        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            headers=headers,
            background=BackgroundTask(response.aclose),
        )

    return Starlette(routes=[Route("/{path:path}", relay, methods=["GET", "POST", "DELETE"])])


def _is_initialized(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "notifications/initialized"


if __name__ == "__main__":
    port, gateway_url, plan_file, log_file = sys.argv[1:]
    app = application(
        int(port),
        gateway_url,
        json.loads(Path(plan_file).read_text()),
        Path(log_file),
        os.environ["PLANGATE_GATEWAY_CREDENTIAL"],
    )
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
