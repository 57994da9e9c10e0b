"""``plangate policy diff|preview|push``: a folder of policy files kept in git, against a
control plane's admin API (``/v1/admin/policies/...``, an admin token).

The folder holds one policy per ``<slug>.json`` file (a file named ``*.cases.json`` is a
test-case file for ``plangate test`` and is left alone). Each file is validated here first,
with the guard's own validator; the control plane validates it again when it publishes.

* ``diff``: each policy whose file differs from its active version, as a unified diff of
  the normalised documents (the hash decides whether they differ);
* ``preview``: the impact preview of each changed policy: how many live plans its next
  refresh would refuse, which and why;
* ``push``: publishes each changed policy with ``expectedBase`` (the version ``diff`` saw),
  so a version published meanwhile by someone else is refused, never overwritten. With
  ``--fail-on-impact`` every preview is read first and nothing is published when any live
  plan would be refused.

The HTTP client (httpx) is imported only here, as ``plangate token verify`` does.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO, cast

from guard.errors import DocumentInvalid
from guard.policy import policy_hash, validate_policy

TOKEN_ENV: Final = "PLANGATE_ADMIN_TOKEN"  # noqa: S105 (the variable's name, not a secret)
URL_ENV: Final = "PLANGATE_URL"
TIMEOUT_SECONDS: Final = 30.0
CASES_SUFFIX: Final = ".cases.json"


class RepoError(Exception):
    """The question could not be asked (exit 2): a bad folder or file, no server, no token."""


class Refused(Exception):
    """The control plane refused (exit 1): a version published meanwhile, a bad document."""


@dataclass(frozen=True)
class LocalPolicy:
    slug: str
    path: Path
    document: dict[str, Any]

    @property
    def hash(self) -> str:
        return policy_hash(self.document)


@dataclass(frozen=True)
class PolicyState:
    """A local policy beside its active version on the control plane (None: not there)."""

    local: LocalPolicy
    active: dict[str, Any] | None

    @property
    def changed(self) -> bool:
        return self.active is None or self.active["hash"] != self.local.hash

    @property
    def base(self) -> int | None:
        return None if self.active is None else int(self.active["number"])


def read_folder(folder: str) -> list[LocalPolicy]:
    """Every ``<slug>.json`` of ``folder``, validated; RepoError naming each bad file."""
    root = Path(folder)
    if not root.is_dir():
        raise RepoError(f"{folder} is not a folder of policy files")
    policies: list[LocalPolicy] = []
    problems: list[str] = []
    for path in sorted(root.glob("*.json")):
        if path.name.endswith(CASES_SUFFIX):
            continue
        slug = path.stem
        try:
            text = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            problems.append(f"{path}: cannot read it as JSON: {error}")
            continue
        try:
            document = validate_policy(text)
        except DocumentInvalid as error:
            problems.extend(f"{path}: invalid_policy: {item}" for item in error.errors)
            continue
        policies.append(LocalPolicy(slug=slug, path=path, document=document))
    if problems:
        raise RepoError("\n".join(problems))
    if not policies:
        raise RepoError(f"{folder} holds no policy file (<slug>.json)")
    return policies


class AdminApi:
    """The few calls ``plangate policy`` makes, with the admin token."""

    def __init__(self, url: str | None, token: str | None) -> None:
        url = url or os.environ.get(URL_ENV)
        token = token or os.environ.get(TOKEN_ENV)
        if not url:
            raise RepoError(f"name the control plane: --url or ${URL_ENV}")
        if not token:
            raise RepoError(f"give an admin token: --token or ${TOKEN_ENV}")
        import httpx

        self._httpx = httpx
        self.client = httpx.Client(
            base_url=url.rstrip("/") + "/v1/admin/",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=TIMEOUT_SECONDS,
            follow_redirects=False,
        )

    def _call(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        try:
            response = self.client.request(method, path, json=body)
        except self._httpx.HTTPError as error:
            raise RepoError(f"cannot reach the control plane: {error}") from None
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if response.status_code in (401, 429) or response.status_code >= 500:
            raise RepoError(_problem_text(response.status_code, answer))
        return response.status_code, answer

    def active_version(self, slug: str) -> dict[str, Any] | None:
        status, answer = self._call("GET", f"policies/{slug}")
        if status == 404:
            return None
        if status != 200:
            raise RepoError(_problem_text(status, answer))
        return cast(dict[str, Any] | None, answer["active"])

    def preview(self, policy: LocalPolicy) -> dict[str, Any]:
        status, answer = self._call(
            "POST", f"policies/{policy.slug}/preview", {"document": policy.document}
        )
        if status != 200:
            raise Refused(f"{policy.path}: {_problem_text(status, answer)}")
        return cast(dict[str, Any], answer)

    def publish(self, state: PolicyState, comment: str) -> dict[str, Any]:
        status, answer = self._call(
            "POST",
            f"policies/{state.local.slug}/versions",
            {"document": state.local.document, "expectedBase": state.base, "comment": comment},
        )
        if status not in (200, 201):
            raise Refused(f"{state.local.path}: {_problem_text(status, answer)}")
        return cast(dict[str, Any], answer)


def _problem_text(status: int, answer: Any) -> str:
    if not isinstance(answer, dict):
        return f"HTTP {status}"
    text = f"{answer.get('code', 'HTTP ' + str(status))}: {answer.get('detail', '')}".rstrip()
    for error in answer.get("errors") or []:
        text += f"\n  {error.get('path') or '(body)'}: {error.get('detail')}"
    return text


def states(api: AdminApi, policies: Sequence[LocalPolicy]) -> list[PolicyState]:
    return [
        PolicyState(local=policy, active=api.active_version(policy.slug)) for policy in policies
    ]


def _pretty(document: object) -> list[str]:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False).splitlines(True)


def write_diff(state: PolicyState, out: TextIO) -> None:
    slug = state.local.slug
    before = _pretty(state.active["document"]) if state.active else []
    after = _pretty(state.local.document)
    label = f"{slug} (version {state.base})" if state.active else f"{slug} (new)"
    out.writelines(
        difflib.unified_diff(before, after, fromfile=label, tofile=str(state.local.path))
    )
    if after and not after[-1].endswith("\n"):
        out.write("\n")


def write_impact(slug: str, impact: dict[str, Any], out: TextIO) -> None:
    affected, checked = impact["plansAffected"], impact["plansChecked"]
    warned = impact.get("plansWarned", 0)
    print(
        f"{slug}: {affected} of {checked} live plan(s) would be refused at their next refresh"
        + (f"; {warned} would see some calls refused" if warned else ""),
        file=out,
    )
    for plan in impact["plans"]:
        print(f"  plan {plan['id']} ({plan['agent']}, {plan['user']})", file=out)
        for step in plan["steps"]:
            rule = "the default" if step["rule"] is None else f"rule {step['rule']}"
            print(
                f"    step {step['number']} {step['tool']}: {step['reason']} ({rule})",
                file=out,
            )
    if len(impact["plans"]) < affected:
        print(f"  ... and {affected - len(impact['plans'])} more", file=out)


def default_comment() -> str:
    """``plangate policy push`` and, in CI, the commit it publishes."""
    commit = os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA")
    return f"plangate policy push ({commit[:12]})" if commit else "plangate policy push"


def run(
    action: str,
    *,
    folder: str,
    url: str | None,
    token: str | None,
    fail_on_impact: bool = False,
    comment: str | None = None,
    as_json: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """One ``plangate policy`` action: 0 done (no impact), 1 impact with --fail-on-impact, a
    refusal, or (``diff`` never) a change; raises RepoError for exit 2."""
    local = read_folder(folder)
    api = AdminApi(url, token)
    found = states(api, local)
    changed = [state for state in found if state.changed]
    if action == "diff":
        if as_json:
            json.dump(
                [
                    {"policy": s.local.slug, "changed": s.changed, "activeVersion": s.base}
                    for s in found
                ],
                out,
                indent=2,
            )
            out.write("\n")
        else:
            for state in changed:
                write_diff(state, out)
            unchanged = len(found) - len(changed)
            print(f"{len(changed)} changed, {unchanged} unchanged", file=out)
        return 0
    impacts = {state.local.slug: api.preview(state.local) for state in changed}
    refused_somewhere = any(impact["plansAffected"] for impact in impacts.values())
    if action == "preview":
        if as_json:
            json.dump(list(impacts.values()), out, indent=2)
            out.write("\n")
        else:
            for slug, impact in impacts.items():
                write_impact(slug, impact, out)
            if not impacts:
                print("nothing changed", file=out)
        return 1 if fail_on_impact and refused_somewhere else 0
    # push
    if fail_on_impact and refused_somewhere:
        for slug, impact in impacts.items():
            if impact["plansAffected"]:
                write_impact(slug, impact, out)
        print("nothing published: live plans would be refused (--fail-on-impact)", file=out)
        return 1
    published = []
    for state in changed:
        answer = api.publish(state, comment or default_comment())
        version = answer["version"]["number"]
        published.append({"policy": state.local.slug, "version": version})
        if not as_json:
            print(f"published {state.local.slug} version {version}", file=out)
    if as_json:
        json.dump({"published": published}, out, indent=2)
        out.write("\n")
    elif not changed:
        print("nothing to publish", file=out)
    return 0
