"""The gateway's test server (upstream_server.py) with an OpenTelemetry SDK installed from
the OTEL_* environment: the MCP SDK's own server spans then continue the `_meta`
traceparent each request carries."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from guard.tracing import provider_from_environment

provider_from_environment(os.environ, service_name="upstream")
runpy.run_path(str(Path(__file__).with_name("upstream_server.py")), run_name="__main__")
