"""`plangate policy diff|preview|push` against a running control plane, as CI runs it: the
command in a subprocess, a folder of policy files, an admin token."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from adminapi.tokens import admin_token_create
from guard.policy_repo import AdminApi, Refused, read_folder, states
from policies.models import PolicyVersion
from policies.selectors import policy_active_version
from policies.services import policy_set
from tests.conftest import POLICY, plan_document
from tests.guard.test_cli import plangate

pytestmark = pytest.mark.slow  # a live server, and the command in a subprocess

NO_GITHUB = {
    "version": 1,
    "default": "deny",
    "rules": [{"effect": "allow", "tools": ["send_email"]}],
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "default.json").write_text(json.dumps(POLICY, indent=2))
    (folder / "default.cases.json").write_text("not a policy, and not read")
    return folder


@pytest.fixture
def env(live_server, team) -> dict[str, str]:
    _, token = admin_token_create(team=team, name="ci", can_write=True)
    return {"PLANGATE_URL": live_server.url, "PLANGATE_ADMIN_TOKEN": token}


@pytest.fixture
def live_plan(live_server, agent) -> str:
    answer = httpx.post(
        f"{live_server.url}/v1/plans",
        json={"plan": plan_document()},
        headers={"Authorization": f"Bearer {agent.api_key}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def policy(name: str, folder: Path, document: dict) -> None:
    (folder / f"{name}.json").write_text(json.dumps(document))


def test_diff_shows_only_what_changed(repo, env, policy_version):
    same = plangate("policy", "diff", str(repo), env=env)
    assert same.returncode == 0, same.stderr
    assert "0 changed, 1 unchanged" in same.stdout

    policy("default", repo, {**POLICY, "default": "allow"})
    policy("ops", repo, NO_GITHUB)
    changed = plangate("policy", "diff", str(repo), env=env)
    assert changed.returncode == 0, changed.stderr
    assert '-  "default": "deny",' in changed.stdout
    assert '+  "default": "allow",' in changed.stdout
    assert "ops (new)" in changed.stdout
    assert "2 changed, 0 unchanged" in changed.stdout


def test_preview_prints_the_plans_a_change_would_refuse(repo, env, live_plan):
    policy("default", repo, NO_GITHUB)
    shown = plangate("policy", "preview", str(repo), env=env)
    assert shown.returncode == 0, shown.stderr
    assert "default: 1 of 1 live plan(s) would be refused" in shown.stdout
    assert f"plan {live_plan}" in shown.stdout
    assert "step 1 github_list_issues" in shown.stdout

    failing = plangate("policy", "preview", str(repo), "--fail-on-impact", env=env)
    assert failing.returncode == 1

    as_json = plangate("policy", "preview", str(repo), "--json", env=env)
    assert json.loads(as_json.stdout)[0]["plans"][0]["id"] == live_plan


def test_push_fails_on_impact_and_publishes_nothing(repo, env, live_plan, team):
    policy("default", repo, NO_GITHUB)
    refused = plangate("policy", "push", str(repo), "--fail-on-impact", env=env)
    assert refused.returncode == 1
    assert "nothing published" in refused.stdout
    assert PolicyVersion.objects.filter(policy__slug="default").count() == 1


def test_push_publishes_each_changed_policy_once(repo, env, policy_version, team):
    policy("default", repo, {**POLICY, "default": "allow"})
    policy("ops", repo, NO_GITHUB)
    pushed = plangate(
        "policy", "push", str(repo), "--json", env={**env, "GITHUB_SHA": "0123456789abcdef"}
    )
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout) == {
        "published": [{"policy": "default", "version": 2}, {"policy": "ops", "version": 1}]
    }
    active = policy_active_version(policy=policy_version.policy)
    assert active.number == 2 and active.comment == "plangate policy push (0123456789ab)"
    assert active.created_by.startswith("admin token pgadm_")

    again = plangate("policy", "push", str(repo), env=env)
    assert again.returncode == 0 and "nothing to publish" in again.stdout


def test_push_refuses_to_overwrite_a_version_published_meanwhile(repo, env, policy_version, team):
    policy("default", repo, {**POLICY, "default": "allow"})
    api = AdminApi(env["PLANGATE_URL"], env["PLANGATE_ADMIN_TOKEN"])
    [seen] = states(api, read_folder(str(repo)))  # what push reads first: version 1
    assert seen.base == 1 and seen.changed
    policy_set(team=team, slug="default", document={**POLICY, "rules": []}, created_by="eve")

    with pytest.raises(Refused) as refused:
        api.publish(seen, "from the folder")

    assert "published_meanwhile" in str(refused.value)
    assert "expectedBase: Version 2 was published by eve" in str(refused.value)
    assert policy_active_version(policy=policy_version.policy).number == 2
    assert PolicyVersion.objects.filter(policy=policy_version.policy).count() == 2


def test_a_read_only_token_previews_but_cannot_push(repo, live_server, team, policy_version):
    _, token = admin_token_create(team=team, can_write=False)
    env = {"PLANGATE_URL": live_server.url, "PLANGATE_ADMIN_TOKEN": token}
    policy("default", repo, {**POLICY, "default": "allow"})
    assert plangate("policy", "preview", str(repo), env=env).returncode == 0
    pushed = plangate("policy", "push", str(repo), env=env)
    assert pushed.returncode == 1
    assert "read_only_token" in pushed.stderr
    assert PolicyVersion.objects.filter(policy=policy_version.policy).count() == 1


def test_bad_input_is_a_usage_error(tmp_path, repo, env):
    policy("broken", repo, {"version": 1, "default": "maybe"})
    bad = plangate("policy", "diff", str(repo), env=env)
    assert bad.returncode == 2 and "broken.json: invalid_policy" in bad.stderr
    (repo / "broken.json").unlink()
    assert plangate("policy", "diff", str(tmp_path / "none"), env=env).returncode == 2
    no_token = plangate(
        "policy", "diff", str(tmp_path), env={"PLANGATE_ADMIN_TOKEN": "", "PLANGATE_URL": "x"}
    )
    assert no_token.returncode == 2
    wrong = plangate(
        "policy", "diff", str(repo), env={**env, "PLANGATE_ADMIN_TOKEN": "pgadm_0123456789ab_x"}
    )
    assert wrong.returncode == 2 and "invalid_admin_token" in wrong.stderr
