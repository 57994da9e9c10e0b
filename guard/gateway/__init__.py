"""The MCP gateway: ``plangate-mcp`` puts the guard in front of any MCP server.

    plangate-mcp --url http://localhost:8000 -- python my_server.py      # stdio
    plangate-mcp --url http://localhost:8000 --upstream-url http://127.0.0.1:9000/mcp

The MCP client talks to the gateway over stdio as it would to the server itself. The
gateway relays every JSON-RPC message unchanged in both directions (over stdio, the very
line that came), except three:

- ``tools/list`` (its first page): the answer gains the guard's ``declare_plan`` tool;
- ``tools/call`` of ``declare_plan``: the gateway declares the plan (never on the event
  loop: declaring touches the network and may wait for a person's approval) and answers;
- every other ``tools/call``: the guard decides it before it reaches the server; a blocked
  call is answered by the gateway with a tool error whose text starts with the decision
  code, an allowed one is forwarded and its answer returned unchanged.

`guard.gateway.results` builds those answers (plain Python); `guard.gateway.wire` (the
messages, with the lines they came as), `guard.gateway.pipes` (stdio read and written by
the event loop), `guard.gateway.relay`, `guard.gateway.upstream` and
`guard.gateway.client_stdio` need the ``mcp`` extra (``pip install "plangate-guard[mcp]"``);
`guard.gateway.cli` is the command, which imports them only once its arguments are read.
"""
