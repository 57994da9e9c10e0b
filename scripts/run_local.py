"""`make run`: one machine, no outside service.

Writes local secrets to var/local.env on first start (and says so), migrates, creates the
first signing keys, seeds the demo team, keeps the demo API key in var/local.env (so every
start prints the same one), then runs gunicorn, a Celery worker and Celery beat on the
embedded filesystem broker.

Their logs go to var/log/ (web.log, worker.log, beat.log); the terminal shows the start's
banner, the lines those logs write at WARNING or above, and one line for each restart. A
worker or beat that exits is started again, after 1 s, twice as long after each exit that
follows a short run, at most a minute; the web server keeps serving meanwhile. The web server
exiting stops everything, as Ctrl-C does. PLANGATE_VAR_DIR moves var/ (relative to the
project), for a test that must not touch the developer's.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / os.environ.get("PLANGATE_VAR_DIR", "var")
ENV_FILE = VAR / "local.env"
LOG_DIR = VAR / "log"
BIN = Path(sys.executable).parent
#: who the activity log names for the changes the start makes (first keys, demo team)
ACTOR = "make run"
#: the variable of var/local.env that keeps the demo agent's API key (seed_demo reads it)
DEMO_API_KEY = "PLANGATE_DEMO_API_KEY"
_PRINTED_API_KEY = re.compile(r"^API key: (pg_\S+)$", re.MULTILINE)

#: a dead worker or beat starts again after this many seconds, doubled after each exit that
#: follows a run shorter than STEADY_SECONDS, up to LONGEST_RESTART_DELAY
FIRST_RESTART_DELAY = 1.0
LONGEST_RESTART_DELAY = 60.0
STEADY_SECONDS = 60.0
#: a log line the terminal shows too: Django's, Celery's and gunicorn's level names...
_SHOWN_LEVEL = re.compile(r"(?<![A-Za-z])(WARNING|ERROR|CRITICAL)(?![A-Za-z])")
_ERROR_LEVEL = re.compile(r"(?<![A-Za-z])(ERROR|CRITICAL)(?![A-Za-z])")
#: ...but for Django's WARNING for each 4xx answer: a refused client is no news to the
#: developer, and an agent's refusals would flood the terminal again
_CLIENT_ERRORS_LOGGER = "django.request"


def shown(path: Path) -> str:
    """A path as the terminal shows it: relative to the project when it is inside."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def ensure_local_env() -> None:
    # The broker's folders (var/broker/...) are made by the worker as it starts.
    VAR.mkdir(parents=True, exist_ok=True)
    if ENV_FILE.exists():
        return
    ENV_FILE.write_text(
        "# Local secrets written by `make run`. Not for production.\n"
        f"SECRET_KEY={secrets.token_urlsafe(50)}\n"
        f"KEY_ENCRYPTION_KEY={Fernet.generate_key().decode()}\n"
        f"PLANGATE_DEMO_ADMIN_PASSWORD={secrets.token_urlsafe(12)}\n"
    )
    ENV_FILE.chmod(0o600)
    print(f"Generated a local SECRET_KEY and KEY_ENCRYPTION_KEY in {shown(ENV_FILE)}")


def load_env() -> dict[str, str]:
    env = dict(os.environ)
    for line in ENV_FILE.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env.setdefault(key.strip(), value.strip())
    # The children's settings find var/ where this script does.
    env["PLANGATE_VAR_DIR"] = str(VAR)
    return env


def keep_demo_api_key(printed: str) -> None:
    """Write the printed demo API key to var/local.env, so the next start prints it again
    (seed_demo reads it back): only there and on the terminal, never in a log."""
    lines = ENV_FILE.read_text().splitlines()
    kept = [line for line in lines if line.startswith(f"{DEMO_API_KEY}=")]
    if kept == [f"{DEMO_API_KEY}={printed}"]:
        return
    lines = [line for line in lines if not line.startswith(f"{DEMO_API_KEY}=")]
    ENV_FILE.write_text("\n".join([*lines, f"{DEMO_API_KEY}={printed}"]) + "\n")
    print(f"Kept the demo API key in {shown(ENV_FILE)}: later starts print the same one.")


def manage(env: dict[str, str], *args: str) -> str:
    """Run a ``manage.py`` command, its output on the terminal; return its standard output."""
    completed = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        # Their INFO log lines (the first keys...) would only repeat what they print.
        env={"LOG_LEVEL": "WARNING", **env},
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    sys.stdout.write(completed.stdout)
    sys.stdout.flush()
    if completed.returncode != 0:
        raise SystemExit(f"manage.py {args[0]} failed (see above); Plangate did not start.")
    return completed.stdout


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


@dataclass
class Child:
    """One process `make run` runs: its command, its log, and how it is doing."""

    name: str
    args: list[str]
    #: started again when it exits (the worker and beat); else its exit stops everything
    restarts: bool
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restart_delay: float = FIRST_RESTART_DELAY
    restart_at: float | None = None
    #: how far the terminal has followed the log, and its last error line since the start
    read_to: int = 0
    last_error: str = ""

    @property
    def log(self) -> Path:
        return LOG_DIR / f"{self.name}.log"

    def start(self, env: dict[str, str]) -> None:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as output:
            self.read_to = output.seek(0, os.SEEK_END)
            # A session of its own: Ctrl-C reaches this script, which stops each child, and
            # what a dead child leaves in its group (a pool process) can be cleared.
            self.process = subprocess.Popen(
                self.args,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started_at, self.restart_at, self.last_error = time.monotonic(), None, ""

    def follow(self) -> None:
        """Show the log's new lines at WARNING or above on the terminal."""
        try:
            with self.log.open("rb") as log:
                log.seek(self.read_to)
                written = log.read()
        except FileNotFoundError:
            return
        whole, newline, _ = written.rpartition(b"\n")
        if not newline:
            return
        self.read_to += len(whole) + 1
        for line in whole.decode(errors="replace").splitlines():
            if _SHOWN_LEVEL.search(line) and not (
                _CLIENT_ERRORS_LOGGER in line and not _ERROR_LEVEL.search(line)
            ):
                print(f"{self.name}: {line}", flush=True)
                if _ERROR_LEVEL.search(line):
                    self.last_error = line.strip()

    def exit_reason(self) -> str:
        assert self.process is not None
        code = self.process.returncode
        if code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
        because = f" after: {self.last_error}" if self.last_error else ""
        return f"{self.name} (pid {self.process.pid}) {how}{because}"

    def clear_group(self) -> None:
        """Kill what is left of the process's group (its pool processes, say)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def schedule_restart(self, now: float) -> None:
        self.follow()  # what it wrote before it died, its last error line included
        self.clear_group()
        ran = now - self.started_at
        if ran >= STEADY_SECONDS:
            self.restart_delay = FIRST_RESTART_DELAY
        print(
            f"{self.exit_reason()}; starting it again in {self.restart_delay:g} s "
            f"(its log: {shown(self.log)})",
            flush=True,
        )
        self.restart_at = now + self.restart_delay
        self.restart_delay = min(self.restart_delay * 2, LONGEST_RESTART_DELAY)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def wait(self) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.clear_group()


def children(env: dict[str, str], port: str) -> list[Child]:
    web = [
        str(BIN / "gunicorn"),
        "controlplane.wsgi",
        "--bind",
        f"{env.get('HOST', '127.0.0.1')}:{port}",
        "--workers",
        env.get("WEB_CONCURRENCY", "2"),
        "--no-control-socket",  # several servers on one machine would share its path
        "--access-logfile",
        "-",
    ]
    celery = [str(BIN / "celery"), "-A", "controlplane"]
    return [
        Child("web", web, restarts=False),
        Child("worker", [*celery, "worker", "--loglevel", "INFO", "--concurrency", "1"], True),
        # Beat on its own: a dead beat starts again without the worker, and the other way.
        Child(
            "beat",
            [*celery, "beat", "--loglevel", "INFO", "--schedule", str(VAR / "celerybeat-schedule")],
            restarts=True,
        ),
    ]


def main() -> int:
    ensure_local_env()
    env = load_env()
    port = env.get("PORT", "8000")
    base_url = f"http://localhost:{port}"
    env.setdefault("PLANGATE_ISSUER", base_url)
    # The demo's printed admin signs straight in on a laptop; a real deployment binds
    # superusers and key operators to a second factor (MFA_REQUIRED_FOR, docs/mfa.md).
    env.setdefault("MFA_REQUIRED_FOR", "")
    env.setdefault("WEBAUTHN_ALLOWED_ORIGINS", base_url)
    for command in start_commands(base_url):
        output = manage(env, *command)
        printed = _PRINTED_API_KEY.search(output)
        if command[0] == "seed_demo" and printed:
            keep_demo_api_key(printed.group(1))
            env[DEMO_API_KEY] = printed.group(1)

    running = children(env, port)
    for child in running:
        child.start(env)
    print(
        f"Plangate is running on {base_url} (web, worker and beat; their logs in "
        f"{shown(LOG_DIR)}/). Ctrl-C stops it all.",
        flush=True,
    )

    asked_to_stop = False

    def stop(*_: object) -> None:
        nonlocal asked_to_stop
        asked_to_stop = True

    # SIGINT explicitly too: started from a script in the background, a process inherits
    # SIGINT ignored, and Ctrl-C (or `kill -INT`) must still stop everything.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    stopped_by: Child | None = None
    try:
        while not asked_to_stop and stopped_by is None:
            now = time.monotonic()
            for child in running:
                child.follow()
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        child.start(env)
                    continue
                assert child.process is not None
                if child.process.poll() is None:
                    continue
                if not child.restarts:
                    stopped_by = child
                    break
                child.schedule_restart(now)
            time.sleep(0.5)
    finally:
        for child in running:
            child.stop()
        for child in running:
            child.wait()
            child.follow()
    if stopped_by is not None:
        print(
            f"{stopped_by.exit_reason()}, so everything was stopped "
            f"(its log: {shown(stopped_by.log)}).",
            flush=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
