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
    assert apps[:4] == ["members", "teams", "policies", "plans"]
    models = re.findall(r'class="model-(\w+)', html)
    assert models.index("member") < models.index("agent") < models.index("apikey")
    assert models.index("role") < models.index("group") < models.index("team")
    assert models.index("policy") < models.index("policyversion")
    assert models.index("plan") < models.index("plantoken") < models.index("signingkey")
    assert "Issued plans" in html


def test_auditors_see_plangate_apps_but_not_users(auditor_client):
    html = auditor_client.get(reverse("admin:index")).content.decode()
    assert "Issued plans" in html
    assert "app-auth" not in html


def test_view_site_leads_to_the_home_page_that_links_every_door(superuser_client, client):
    html = superuser_client.get(reverse("admin:index")).content.decode()
    links = re.findall(r'<a href="([^"]*)">View site</a>', html)
    assert links == ["/"]

    # Anyone who types the server's address gets it, not a bare 404.
    response = client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "<title>Plangate control plane | Plangate admin</title>" in page
    doors = re.findall(r'<a href="([^"]*)">', page.split('id="plangate-doors"')[1])
    assert doors[:6] == [
        "/admin/",
        "/v1/docs",
        "/v1/schema",
        "/v1/keys/jwks",
        "/healthz",
        "/readyz",
    ]
    for door in doors[1:6]:
        assert client.get(door).status_code in (200, 503), door  # readyz: no key yet


def test_the_home_page_answers_get_only(client, db):
    assert client.post("/").status_code == 405
