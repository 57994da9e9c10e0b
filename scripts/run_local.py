"""`make run`: one machine, no outside service.

Writes local secrets to var/local.env on first start (and says so), migrates, creates the
first signing keys, seeds the demo team, then runs gunicorn and a Celery worker with beat on
the embedded filesystem broker. Ctrl-C stops them all.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
ENV_FILE = VAR / "local.env"
BIN = Path(sys.executable).parent
#: who the activity log names for the changes the start makes (first keys, demo team)
ACTOR = "make run"


def ensure_local_env() -> None:
    # The broker's folders (var/broker/...) are made by the worker as it starts.
    VAR.mkdir(exist_ok=True)
    if ENV_FILE.exists():
        return
    ENV_FILE.write_text(
        "# Local secrets written by `make run`. Not for production.\n"
        f"SECRET_KEY={secrets.token_urlsafe(50)}\n"
        f"KEY_ENCRYPTION_KEY={Fernet.generate_key().decode()}\n"
        f"PLANGATE_DEMO_ADMIN_PASSWORD={secrets.token_urlsafe(12)}\n"
    )
    ENV_FILE.chmod(0o600)
    print(f"Generated a local SECRET_KEY and KEY_ENCRYPTION_KEY in {ENV_FILE.relative_to(ROOT)}")


def load_env() -> dict[str, str]:
    env = dict(os.environ)
    for line in ENV_FILE.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env.setdefault(key.strip(), value.strip())
    return env


def manage(env: dict[str, str], *args: str) -> None:
    completed = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env)
    if completed.returncode != 0:
        raise SystemExit(f"manage.py {args[0]} failed (see above); Plangate did not start.")


def start_commands(base_url: str) -> list[tuple[str, ...]]:
    """The ``manage.py`` commands every start runs before the servers, in order."""
    return [
        ("migrate", "--noinput", "-v", "0"),
        # The first signing keys, on a fresh database, so /readyz and the JWKS answer from
        # the start (reads never create keys); on later starts, what the scheduled check does.
        ("rotate_keys", "--if-due", "--actor", ACTOR),
        ("collectstatic", "--noinput", "-v", "0"),
        ("seed_demo", "--base-url", base_url, "--actor", ACTOR),
    ]


def main() -> int:
    ensure_local_env()
    env = load_env()
    port = env.get("PORT", "8000")
    base_url = f"http://localhost:{port}"
    env.setdefault("PLANGATE_ISSUER", base_url)
    for command in start_commands(base_url):
        manage(env, *command)

    processes = [
        subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "controlplane.wsgi",
                "--bind",
                f"{env.get('HOST', '127.0.0.1')}:{port}",
                "--workers",
                env.get("WEB_CONCURRENCY", "2"),
                "--no-control-socket",  # several servers on one machine would share its path
                "--access-logfile",
                "-",
            ],
            cwd=ROOT,
            env=env,
        ),
        subprocess.Popen(
            [
                str(BIN / "celery"),
                "-A",
                "controlplane",
                "worker",
                "-B",
                "--loglevel",
                "INFO",
                "--concurrency",
                "1",
                "--schedule",
                str(VAR / "celerybeat-schedule"),
            ],
            cwd=ROOT,
            env=env,
        ),
    ]
    print(
        f"Plangate is running on {base_url} (web, worker and beat). Ctrl-C stops it all.",
        flush=True,
    )

    asked_to_stop = False

    def stop(*_: object) -> None:
        nonlocal asked_to_stop
        asked_to_stop = True
        for process in processes:
            if process.poll() is None:
                process.terminate()

    # SIGINT explicitly too: started from a script in the background, a process inherits
    # SIGINT ignored, and Ctrl-C (or `kill -INT`) must still stop everything.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    died: list[subprocess.Popen] = []
    try:
        while all(process.poll() is None for process in processes):
            time.sleep(0.5)
    finally:
        if not asked_to_stop:
            died = [process for process in processes if process.poll() is not None]
        stop()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
    if died:
        names = ", ".join(Path(process.args[0]).name for process in died)
        print(f"{names} exited by itself (see above), so everything was stopped.", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
