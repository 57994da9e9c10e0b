"""Start the test OpenID Provider (tests/identity/provider, django-oauth-toolkit) as its own
server process, seeded with the directory's people and a client for Plangate."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID = "plangate-console"
CLIENT_SECRET = "provider-client-secret"
PASSWORD = "directory-pw"


@dataclass(frozen=True)
class Provider:
    url: str
    issuer: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def oidc_provider(tmp_path: Path, redirect_uri: str) -> Iterator[Provider]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.identity.provider.settings",
        "PROVIDER_DB": str(tmp_path / "provider.sqlite3"),
        "PROVIDER_RSA_KEY": pem,
        "PROVIDER_ISSUER": f"{url}/o",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DATABASE_URL", None)

    def run(*args: str) -> None:
        subprocess.run(
            [sys.executable, *args], env=env, cwd=ROOT, check=True, capture_output=True, timeout=120
        )

    run("-m", "django", "migrate", "--noinput")
    run("-m", "tests.identity.provider.seed", redirect_uri, CLIENT_ID, CLIENT_SECRET)
    server = subprocess.Popen(
        [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/o/.well-known/openid-configuration", timeout=2).is_success:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the test OpenID Provider did not start")
            time.sleep(0.2)
        yield Provider(url=url, issuer=f"{url}/o")
    finally:
        server.terminate()
        server.wait(timeout=30)
