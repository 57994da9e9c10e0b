"""Team, Role and Group moved from ``members`` to ``teams`` (members/migrations/0008,
docs/decisions/0062): a database migrated before the move keeps its rows, and the groups
keep their rights on the three models under the new label."""

from __future__ import annotations

import importlib

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from members.models import Member
from teams.models import Team

#: the last migration of each app before the move; teams unapplied
BEFORE = [("members", "0007_team_retention_days"), ("teams", None)]


@pytest.mark.django_db(transaction=True)
def test_a_database_from_before_the_move_keeps_its_teams_and_the_groups_their_rights():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE[0]).apps
    OldGroup = old.get_model("auth", "Group")
    importlib.import_module("members.migrations.0003_admin_groups").grant(
        OldGroup, old.get_model("auth", "Permission")
    )
    team = old.get_model("members", "Team").objects.create(slug="acme", name="Acme")
    role = old.get_model("members", "Role").objects.create(team=team, name="sre")
    group = old.get_model("members", "Group").objects.create(team=team, name="ops")
    member = old.get_model("members", "Member").objects.create(
        team=team, email="ada@example.test", role=role
    )
    member.groups.add(group)
    user = old.get_model("auth", "User").objects.create(username="lead", is_staff=True)
    user.groups.add(OldGroup.objects.get(name="Team admins"))
    team.staff.add(user)

    call_command("migrate", verbosity=0)
    ContentType.objects.clear_cache()

    moved = Team.objects.get(pk=team.pk)
    assert moved.slug == "acme"
    assert [staff.username for staff in moved.staff.all()] == ["lead"]
    ada = Member.objects.get(pk=member.pk)
    assert ada.role is not None and ada.role.name == "sre"
    assert ada.group_names() == ["ops"]
    lead = User.objects.get(pk=user.pk)
    assert lead.has_perm("teams.change_team")
    assert lead.has_perm("teams.add_role") and lead.has_perm("teams.delete_group")
    assert not lead.has_perm("members.change_team")
    # The content types moved rather than being made again: no stale label, no duplicate.
    assert not ContentType.objects.filter(app_label="members", model__in=["team", "role", "group"])
    assert Permission.objects.filter(codename="change_team").count() == 1
