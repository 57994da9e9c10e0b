"""A policy's save says one thing: saving the active document again says that nothing was
published (not also "was changed successfully"), and a publication names its version."""

from __future__ import annotations

from django.contrib.messages import constants

from audit.models import ActivityRecord
from tests.conftest import POLICY

from .test_policies import edit, tightened


def messages_of(client, response) -> list[str]:
    """The messages the page after the save shows, but the warnings about names the
    document uses that the team lacks (they are about the document, and have their tests)."""
    assert response.status_code == 302, response.content.decode()
    page = client.get(response["Location"])
    return [
        str(message)
        for message in page.context["messages"]
        if message.level != constants.WARNING or "matches no member" not in str(message)
    ]


def test_saving_an_unchanged_document_says_one_thing_and_publishes_nothing(
    team_admin_client, agent
):
    policy = agent.agent.policy
    activity = ActivityRecord.objects.count()

    shown = messages_of(team_admin_client, edit(team_admin_client, policy, POLICY))

    assert shown == [
        "The document is the same as version 1: no version was published, and version 1 "
        "stays active."
    ]
    assert list(policy.versions.values_list("number", flat=True)) == [1]
    assert ActivityRecord.objects.count() == activity


def test_an_unchanged_document_with_a_new_description_says_both_in_one_message(
    team_admin_client, agent
):
    policy = agent.agent.policy

    response = edit(team_admin_client, policy, POLICY, description="read and triage")

    assert messages_of(team_admin_client, response) == [
        "Saved the description. The document is the same as version 1: no version was "
        "published, and version 1 stays active."
    ]
    policy.refresh_from_db()
    assert policy.description == "read and triage"
    assert policy.versions.count() == 1


def test_a_publication_names_its_version_once(team_admin_client, agent):
    policy = agent.agent.policy

    shown = messages_of(team_admin_client, edit(team_admin_client, policy, tightened()))

    assert [message for message in shown if "successfully" in message] == []
    assert shown[0].startswith("Published default version 2.")
    assert list(policy.versions.order_by("number").values_list("number", flat=True)) == [1, 2]
