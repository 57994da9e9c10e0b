"""``python -m guard.gateway``: the same as the ``plangate-mcp`` command."""

from guard.gateway.cli import main

raise SystemExit(main())
