"""The admin's two roles as Django groups: "Team admins" and "Auditors".

Auditors hold only view permissions. Team admins manage members, roles, groups, agents,
API keys and policies; on audit records they hold one change permission each, which the
admin reads as "may run the action": ``change_apikey`` revokes a key, ``change_plan``
revokes a plan. The admin shows audit records read-only to everyone, whatever their
permissions. Rotating and revoking the signing keys every team shares
(``change_signingkey``) belongs to "Key operators" (0004_key_operators).

Assigning a person to a team (``Team.staff``) and creating users stays with superusers.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

TEAM_ADMINS = "Team admins"
AUDITORS = "Auditors"

VIEWED = {
    "members": ["team", "member", "role", "group", "agent", "apikey"],
    "policies": ["policy", "policyversion"],
    "plans": ["plan", "plantoken", "planevent", "plandisplayupdate", "signingkey"],
}

TEAM_ADMIN_WRITES = {
    "members": {
        "team": ["change"],
        "member": ["add", "change", "delete"],
        "role": ["add", "change", "delete"],
        "group": ["add", "change", "delete"],
        "agent": ["add", "change"],
        "apikey": ["add", "change"],
    },
    "policies": {"policy": ["add", "change"]},
    "plans": {"plan": ["change"]},
}


def _codenames(team_admin: bool) -> set[tuple[str, str]]:
    wanted = {
        (app_label, f"view_{model}") for app_label, models in VIEWED.items() for model in models
    }
    if team_admin:
        wanted |= {
            (app_label, f"{action}_{model}")
            for app_label, models in TEAM_ADMIN_WRITES.items()
            for model, actions in models.items()
            for action in actions
        }
    return wanted


#: models that later moved to the ``teams`` app (0008_team_role_group_to_teams), with
#: their permissions: ``grant`` finds those under either label
MOVED_TO_TEAMS = {"team", "role", "group"}


def _label(permission) -> tuple[str, str]:
    app_label, model = permission.content_type.app_label, permission.content_type.model
    if app_label == "teams" and model in MOVED_TO_TEAMS:
        app_label = "members"
    return app_label, permission.codename


def grant(Group, Permission) -> None:
    """Create the two groups, or top them up, with their permissions. Also callable with
    the real models (tests recreate the groups after a transactional test's flush)."""
    for name, team_admin in ((TEAM_ADMINS, True), (AUDITORS, False)):
        wanted = _codenames(team_admin)
        permissions = [
            permission
            for permission in Permission.objects.select_related("content_type").filter(
                content_type__app_label__in={*VIEWED.keys(), "teams"}
            )
            if _label(permission) in wanted
        ]
        missing = wanted - {_label(p) for p in permissions}
        if missing:
            raise RuntimeError(f"permissions not found: {sorted(missing)}")
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*permissions)


def create_groups(apps, schema_editor):
    # Permissions are normally created after the whole migrate run; create them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    grant(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=[TEAM_ADMINS, AUDITORS]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("members", "0002_initial"),
        ("policies", "0001_initial"),
        ("plans", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
