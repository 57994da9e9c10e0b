"""The gateway's test server over streamable HTTP, writing the headers of every request it
gets to a file (one JSON object a line): what the gateway sends upstream, seen upstream.

    python tests/gateway/recording_upstream.py PORT FILE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import Annotated

from pydantic import Field
from upstream_server import server


@server.tool(description="Say where: its region is also an Mcp-Param-Region header.")
def locate(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    return f"in {region}"


def main() -> None:
    port, record = int(sys.argv[1]), Path(sys.argv[2])
    inner = server.streamable_http_app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {
                name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]
            }
            with record.open("a", encoding="utf-8") as file:
                file.write(json.dumps(headers) + "\n")
        await inner(scope, receive, send)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
