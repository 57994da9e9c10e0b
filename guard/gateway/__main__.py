"""``python -m guard.gateway``: the same as the ``plangate-mcp`` command."""

from guard.gateway.cli import main

if __name__ == "__main__":  # importing the module (as the install test does) runs nothing
    raise SystemExit(main())
