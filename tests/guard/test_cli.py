"""`plangate`, run as people and CI run it (`python -m guard.cli` in a subprocess): every
subcommand, its output and its exit status (0 yes, 1 no, 2 the question could not be asked).
The token commands against a live control plane are in test_cli_token.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.errors import DocumentInvalid
from guard.jwk import b64url_encode
from guard.plan import plan_hash, validate_plan
from guard.policy import policy_hash, validate_policy
from kernel.problems import DomainError
from plans.services import plan_document_validate
from policies.services import policy_document_validate
from tests.conftest import PLAN, POLICY, plan_document

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "policy_tests"

pytestmark = pytest.mark.slow  # each test starts the command in a subprocess

BAD_PLAN = {
    "version": 1,
    "goal": "",
    "user": "not an address",
    "steps": [
        {"tool": "x y", "args": {"a": {"eq": 1, "glob": "x"}}},
        {"tool": "ok", "maxCalls": 0},
    ],
    "extra": 1,
}
BAD_POLICY = {"version": 1, "default": "maybe", "rules": [{"effect": "allow"}, "x"]}
REPO = {"repo": "acme/public-app"}


def plangate(*args: str, stdin: str | None = None, env: dict[str, str] | None = None):
    """Run `plangate ARGS...` as `python -m guard.cli`, from the repository's root."""
    return subprocess.run(
        [sys.executable, "-m", "guard.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def write(tmp_path: Path, name: str, document: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def server_paths(error: DomainError) -> list[dict[str, str]]:
    return [{"path": item.path, "detail": item.detail} for item in error.errors]


# --- validate -----------------------------------------------------------------------------


def test_validate_a_valid_plan_and_policy_prints_their_hashes(tmp_path):
    plan = plangate("validate", write(tmp_path, "plan.json", PLAN))
    policy = plangate("validate", "--json", write(tmp_path, "policy.json", POLICY))

    assert plan.returncode == 0, plan.stderr
    assert plan_hash(validate_plan(PLAN)) in plan.stdout
    assert plan.stdout.startswith("valid plan: ")
    assert policy.returncode == 0, policy.stderr
    assert json.loads(policy.stdout) == {
        "valid": True,
        "kind": "policy",
        "hash": policy_hash(validate_policy(POLICY)),
    }


def test_validate_gives_every_plan_error_at_the_paths_the_api_answers(tmp_path):
    result = plangate("validate", "--json", write(tmp_path, "plan.json", BAD_PLAN))

    assert result.returncode == 1
    with pytest.raises(DomainError) as server:
        plan_document_validate(BAD_PLAN)
    body = json.loads(result.stdout)
    assert body["code"] == server.value.code == "invalid_plan"
    assert body["errors"] == server_paths(server.value)
    assert {"plan.goal", "plan.extra", "plan.steps[1].maxCalls"} <= {
        error["path"] for error in body["errors"]
    }


def test_validate_prints_policy_errors_one_a_line_as_the_server_gives_them(tmp_path):
    result = plangate("validate", write(tmp_path, "policy.json", BAD_POLICY))

    assert result.returncode == 1
    with pytest.raises(DomainError) as server:
        policy_document_validate(BAD_POLICY)
    assert server.value.code == "invalid_policy"
    assert result.stdout.splitlines() == [
        f"{error.path}: {error.detail}" for error in server.value.errors
    ]
    assert "invalid_policy" in result.stderr
    assert f"{len(server.value.errors)} errors" in result.stderr


def test_validate_reads_standard_input_and_is_told_the_kind(tmp_path):
    told = plangate("validate", "--kind", "plan", "--json", "-", stdin="[1, 2]")
    untold = plangate("validate", "-", stdin="[1, 2]")

    assert told.returncode == 1
    with pytest.raises(DocumentInvalid) as error:
        validate_plan([1, 2])
    assert json.loads(told.stdout)["errors"] == [
        {"path": "plan", "detail": error.value.errors[0].detail}
    ]
    assert untold.returncode == 2
    assert "--kind" in untold.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["validate", "/nonexistent/plan.json"], None, "cannot read"),
        (["validate", "-"], "{not json", "not JSON"),
        (["validate", "-"], '{"version": NaN}', "not JSON"),
        (["validate"], None, "usage:"),
        (["frobnicate"], None, "usage:"),
        ([], None, "usage:"),
    ],
)
def test_unusable_input_or_usage_exits_2(args, stdin, message):
    result = plangate(*args, stdin=stdin)

    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


# --- check --------------------------------------------------------------------------------


def check(tmp_path: Path, *args: str, plan: object = PLAN, policy: object = POLICY):
    return plangate(
        "check",
        "--plan",
        write(tmp_path, "plan.json", plan),
        "--policy",
        write(tmp_path, "policy.json", policy),
        *args,
    )


def test_check_an_allowed_call_prints_code_step_and_rule_and_exits_0(tmp_path):
    result = check(tmp_path, "github_list_issues", json.dumps(REPO))

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # The step as the reason counts it, from 1.
    assert lines[:3] == ["decision: allowed", "step: 1", "rule: allow github_* (rules[0])"]
    assert lines[3].startswith("reason: step 1 (github_list_issues) of the plan")


@pytest.mark.parametrize(
    ("tool", "args", "code", "step", "rule"),
    [
        ("github_list_issues", {"repo": "acme/other"}, "not_in_plan", None, None),
        ("send_email", {"to": "x@acme.dev"}, "not_in_plan", None, None),
        ("github_list_issues", [], "invalid_arguments", None, None),
    ],
)
def test_check_a_blocked_call_exits_1_with_its_code(tmp_path, tool, args, code, step, rule):
    result = check(tmp_path, "--json", tool, json.dumps(args))

    assert result.returncode == 1
    call = json.loads(result.stdout)["call"]
    assert (call["decision"], call["step"], call["rule"]) == (code, step, rule)


def test_check_a_call_the_policy_denies_names_the_step_and_rule(tmp_path):
    plan = plan_document(steps=[{"tool": "github_get_issue"}])

    result = check(tmp_path, "--json", "github_get_issue", '{"repo": "evil/x"}', plan=plan)

    assert result.returncode == 1
    call = json.loads(result.stdout)["call"]
    assert (call["decision"], call["step"], call["rule"]) == ("policy_denied", 0, None)
    assert (call["stepIndex"], call["stepNumber"]) == (0, 1)
    assert "the policy default" in call["reason"]


def test_check_takes_the_members_role_and_groups(tmp_path):
    plan = plan_document(steps=[{"tool": "deploy", "maxCalls": 5}])
    as_sre = ["--role", "sre", "--group", "oncall", "--group", "platform"]

    sre = check(tmp_path, *as_sre, "--json", "deploy", "{}", plan=plan)
    engineer = check(tmp_path, "--role", "engineer", "deploy", "{}", plan=plan)

    assert sre.returncode == 0, sre.stdout + sre.stderr
    body = json.loads(sre.stdout)
    assert body["plan"]["role"] == "sre"
    assert body["plan"]["groups"] == ["oncall", "platform"]
    assert (body["call"]["decision"], body["call"]["rule"]) == ("allowed", 3)
    assert engineer.returncode == 1
    assert json.loads(sre.stdout)["plan"]["user"] == "alice@acme.dev"
    assert engineer.stdout.splitlines()[0] == (
        "plan refused: policy_denied: The policy denies 1 step(s) of the plan."
    )


def test_check_a_plan_the_policy_refuses_prints_the_issuance_refusal(tmp_path):
    plan = plan_document(
        steps=[*PLAN["steps"], {"tool": "github_delete_repo"}, {"tool": "slack_post"}]
    )

    result = check(tmp_path, "--json", "github_list_issues", json.dumps(REPO), plan=plan)

    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["call"] is None
    assert body["plan"]["decision"] == "policy_denied"
    assert body["plan"]["errors"] == [
        {
            "path": "plan.steps[2]",
            "detail": "step 3 (github_delete_repo): deny rule forbids tool github_delete_repo"
            " (rules[1])",
        },
        {
            "path": "plan.steps[3]",
            "detail": "step 4 (slack_post): no allow rule admits tool slack_post for this"
            " member (policy default)",
        },
    ]


def test_check_an_invalid_plan_is_refused_as_issuance_refuses_it(tmp_path):
    result = check(tmp_path, "github_list_issues", "{}", plan=BAD_PLAN)

    assert result.returncode == 1
    with pytest.raises(DomainError) as server:
        plan_document_validate(BAD_PLAN)
    assert result.stdout.splitlines() == [
        "plan refused: invalid_plan: The plan is invalid.",
        *(f"  {error.path}: {error.detail}" for error in server.value.errors),
    ]


def test_check_with_a_user_answers_for_that_member(tmp_path):
    result = check(tmp_path, "--user", "bob@acme.dev", "--json", "github_list_issues", "{}")

    assert json.loads(result.stdout)["plan"]["user"] == "bob@acme.dev"


def test_check_an_invalid_policy_or_arguments_is_a_usage_error(tmp_path):
    policy = check(tmp_path, "github_list_issues", "{}", policy=BAD_POLICY)
    arguments = check(tmp_path, "github_list_issues", "{repo:")

    assert policy.returncode == arguments.returncode == 2
    assert "invalid_policy" in policy.stderr
    assert "rules[0].tools: is required" in policy.stderr
    assert "ARGS_JSON is not JSON" in arguments.stderr


# --- test ---------------------------------------------------------------------------------


def test_the_example_cases_pass(tmp_path):
    result = plangate("test", str(EXAMPLE / "policy.json"), str(EXAMPLE / "cases.json"))

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    cases = json.loads((EXAMPLE / "cases.json").read_text())["cases"]
    assert lines[:-1] == [f"PASS cases[{index}] {case['name']}" for index, case in enumerate(cases)]
    assert lines[-1] == f"{len(cases)} passed, 0 failed"


def test_a_failing_case_prints_the_difference_and_exits_1(tmp_path):
    plan = plan_document(steps=[{"tool": "github_list_issues"}])
    cases = {
        "version": 1,
        "plans": {"list": plan},
        "cases": [
            {
                "name": "a foreign repository",
                "plan": "list",
                "call": {"tool": "github_list_issues", "args": {"repo": "evil/x"}},
                "expect": {"decision": "allowed", "rule": 0},
            },
            {"name": "issued", "plan": "list", "expect": {"plan": "issued"}},
            {
                "name": "mail",
                "plan": plan_document(steps=[{"tool": "slack_post"}]),
                "expect": {"plan": "issued"},
            },
        ],
    }

    result = plangate(
        "test", write(tmp_path, "policy.json", POLICY), write(tmp_path, "cases.json", cases)
    )

    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        'FAIL cases[0] a foreign repository: decision: expected "allowed", got'
        ' "policy_denied"; rule: expected 0, got null'
    )
    assert "PASS cases[1] issued" in lines
    assert 'FAIL cases[2] mail: plan: expected "issued", got "policy_denied"' in lines
    assert "     plan.steps[0]: step 1 (slack_post): no allow rule admits tool slack_post" in (
        result.stdout
    )
    assert lines[-1] == "1 passed, 2 failed"


def test_test_json_output_and_the_schema(tmp_path):
    result = plangate("test", "--json", str(EXAMPLE / "policy.json"), str(EXAMPLE / "cases.json"))
    schema = plangate("test", "--schema")

    assert result.returncode == 0
    body = json.loads(result.stdout)
    assert body["failed"] == 0
    assert all(case["passed"] for case in body["cases"])
    assert schema.returncode == 0
    assert json.loads(schema.stdout)["$id"] == "urn:plangate:policy-cases:1"


def test_an_invalid_cases_file_names_every_bad_path_and_exits_2(tmp_path):
    cases = {"version": 2, "cases": [{"name": "x", "plan": "missing", "expect": {"plan": "ok"}}]}

    result = plangate(
        "test", write(tmp_path, "policy.json", POLICY), write(tmp_path, "cases.json", cases)
    )

    assert result.returncode == 2
    assert "version: must be the integer 1" in result.stderr
    assert "cases[0].plan: names no plan of plans" in result.stderr
    assert "cases[0].expect.plan: must be one of issued, policy_denied, invalid_plan" in (
        result.stderr
    )
    assert result.stdout == ""


# --- token decode (verify: test_cli_token.py) ---------------------------------------------


def test_decode_is_labelled_unverified(tmp_path):
    header = {"alg": "EdDSA", "kid": "k1", "typ": "JWT"}
    claims = {"sub": "alice@acme.dev", "jti": "01J"}
    token = ".".join(
        [*(b64url_encode(json.dumps(part).encode()) for part in (header, claims)), "c2ln"]
    )

    result = plangate("token", "decode", "-", stdin=token + "\n")
    garbage = plangate("token", "decode", "not-a-token")

    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("UNVERIFIED: ")
    assert json.loads(result.stdout) == {"verified": False, "header": header, "claims": claims}
    assert garbage.returncode == 1
    assert garbage.stderr.startswith("UNVERIFIED: ")
    assert "token_invalid: " in garbage.stderr


def test_the_examples_ci_line_runs_the_cases(tmp_path):
    # The Makefile line a team copies into its CI, with the checkout's copy of the command.
    result = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(EXAMPLE),
            "policy-test",
            f"PLANGATE={sys.executable} -m guard.cli",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("valid policy: policy.json")
    assert result.stdout.splitlines()[-1].endswith(" passed, 0 failed")
