"""`plangate-mcp`'s usage errors: exit status 2 and a message saying what is missing,
before anything is started."""

from __future__ import annotations

import pytest

from guard.gateway.cli import EXIT_USAGE, main

URL = "http://127.0.0.1:9"


def usage_error(monkeypatch, capsys, argv: list[str], environment: dict[str, str]) -> str:
    for name in ("PLANGATE_API_KEY", "PLANGATE_URL", "PLANGATE_ISSUER"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == EXIT_USAGE
    return capsys.readouterr().err


def test_no_api_key_is_a_usage_error(monkeypatch, capsys):
    error = usage_error(monkeypatch, capsys, ["--url", URL, "--", "server"], {})

    assert "no API key: set PLANGATE_API_KEY" in error


def test_no_control_plane_url_is_a_usage_error(monkeypatch, capsys):
    error = usage_error(monkeypatch, capsys, ["--", "server"], {"PLANGATE_API_KEY": "pg_x"})

    assert "no control plane: give --url URL or set PLANGATE_URL" in error


def test_no_server_to_wrap_is_a_usage_error(monkeypatch, capsys):
    error = usage_error(monkeypatch, capsys, [], {"PLANGATE_API_KEY": "pg_x", "PLANGATE_URL": URL})

    assert "no MCP server to wrap" in error


def test_a_command_and_an_upstream_url_together_are_a_usage_error(monkeypatch, capsys):
    error = usage_error(
        monkeypatch,
        capsys,
        ["--upstream-url", "http://127.0.0.1:9/mcp", "--", "server"],
        {"PLANGATE_API_KEY": "pg_x", "PLANGATE_URL": URL},
    )

    assert "not both" in error
