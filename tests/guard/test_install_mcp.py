"""`pip install "./guard[mcp]"` into a fresh virtualenv gives a working `plangate-mcp`;
without the extra the command is there too, and says which extra it needs.

`test_install.py`'s import-everything check imports the gateway's modules as well: this
repository's environment installs the extra (requirements-dev.txt), so every module of the
package must import there. Which modules need the extra, and that the command without it
fails clearly rather than with a traceback, is this test's to show."""

from __future__ import annotations

from pathlib import Path

import pytest

from .installed import fresh_virtualenv


@pytest.mark.slow  # builds a virtualenv and runs pip
def test_pip_install_with_the_mcp_extra_gives_a_working_plangate_mcp(tmp_path):
    installed = fresh_virtualenv(tmp_path)
    ready = {"PLANGATE_API_KEY": "pg_unused", "PLANGATE_URL": "http://127.0.0.1:9"}

    installed.pip_install(str(installed.source))
    without_extra = installed.run("plangate-mcp", "--", "some-server", extra_env=ready)
    installed.pip_install(f"{installed.source}[mcp]")
    helped = installed.run("plangate-mcp", "--help")
    gateway_modules = installed.run(
        installed.bin("python"),
        "-c",
        "import guard.gateway.serve, guard.gateway.relay, mcp; print(guard.gateway.serve.__file__)",
    )
    missing_key = installed.run("plangate-mcp", "--url", "http://127.0.0.1:9", "--", "some-server")

    assert without_extra.returncode == 2
    assert 'the MCP gateway needs the mcp extra: pip install "plangate-guard[mcp]"' in (
        without_extra.stderr
    )
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: plangate-mcp")
    assert "--upstream-url" in helped.stdout
    assert gateway_modules.returncode == 0, gateway_modules.stderr
    assert Path(gateway_modules.stdout.strip()).is_relative_to(installed.venv)
    assert missing_key.returncode == 2
    assert "PLANGATE_API_KEY" in missing_key.stderr
