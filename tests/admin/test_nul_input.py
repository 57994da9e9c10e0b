"""NUL characters reach no database through the admin: PostgreSQL cannot store or compare
them, so each is answered as bad input, never with a 500."""

from __future__ import annotations

import json

import pytest

from policies.models import PolicyVersion
from tests.conftest import POLICY


@pytest.mark.parametrize(
    "url",
    [
        "/admin/plans/plan/%00/change/",
        "/admin/members/member/%00/change/",
        "/admin/plans/plan/?q=%00",
        "/admin/members/member/?q=a%00b",
        "/admin/plans/plan/?member_email=%00",
        "/admin/plans/signingkey/%00/change/",
    ],
)
def test_nul_in_an_admin_url_is_not_a_server_error(superuser_client, plan, url):
    response = superuser_client.get(url)

    assert response.status_code in {302, 400, 404}, response.status_code


def test_nul_in_a_policy_document_is_refused_on_the_form(superuser_client, policy_version):
    document = {**POLICY, "rules": [{**POLICY["rules"][0], "name": "bad\u0000name"}]}
    url = f"/admin/policies/policy/{policy_version.policy.pk}/change/"
    form = superuser_client.get(url).context["adminform"].form
    data = {name: form[name].value() or "" for name in form.fields}
    data.update({"document": json.dumps(document), "comment": ""})

    response = superuser_client.post(url, data)

    assert response.status_code == 200
    assert PolicyVersion.objects.count() == 1
