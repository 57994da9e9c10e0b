"""The admin site: titled Plangate, the apps in the order people work in."""

from __future__ import annotations

import re

from django.urls import reverse


def test_the_site_is_titled_plangate(superuser_client):
    html = superuser_client.get(reverse("admin:index")).content.decode()
    assert "<title>Control plane | Plangate admin</title>" in html
    assert ">Plangate<" in html


def test_the_index_lists_apps_and_models_in_working_order(superuser_client):
    html = superuser_client.get(reverse("admin:index")).content.decode()
    apps = re.findall(r'class="app-(\w+) module', html)
    assert apps[:3] == ["members", "policies", "plans"]
    models = re.findall(r'class="model-(\w+)', html)
    assert models.index("member") < models.index("agent") < models.index("apikey")
    assert models.index("policy") < models.index("policyversion")
    assert models.index("plan") < models.index("plantoken") < models.index("signingkey")
    assert "Issued plans" in html


def test_auditors_see_plangate_apps_but_not_users(auditor_client):
    html = auditor_client.get(reverse("admin:index")).content.decode()
    assert "Issued plans" in html
    assert "app-auth" not in html


def test_view_site_leads_to_the_api_docs_not_a_404(superuser_client):
    html = superuser_client.get(reverse("admin:index")).content.decode()
    links = re.findall(r'<a href="([^"]*)">View site</a>', html)

    assert links == ["/v1/docs"]
    assert superuser_client.get(links[0]).status_code == 200
