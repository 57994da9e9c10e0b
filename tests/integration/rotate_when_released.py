"""Run by test_key_rotation_processes in a separate OS process.

Sets Django up and connects, says it is ready, waits for the barrier file, then rotates once
and prints the outcome as JSON. Usage: python -m tests.integration.rotate_when_released
READY_FILE BARRIER_FILE force|scheduled
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import django


def main() -> int:
    ready, barrier, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    django.setup()
    from django.db import connection

    from plans.keys import signing_key_rotate

    connection.ensure_connection()
    ready.touch()
    deadline = time.monotonic() + 120
    while not barrier.exists():
        if time.monotonic() > deadline:
            print("the barrier was never released", file=sys.stderr)
            return 2
        time.sleep(0.002)
    result = signing_key_rotate(force=mode == "force")
    print(
        json.dumps(
            {
                "outcome": result.outcome,
                "retired": result.retired,
                "activated": result.activated,
                "created": result.created,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
