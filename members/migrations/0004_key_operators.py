"""Signing keys are shared by every team: rotating or revoking one reaches every team's
agents. Their permission (``change_signingkey``, which the admin reads as "may rotate and
revoke") leaves "Team admins" and goes to a "Key operators" group that no team role includes.
Superusers hold it anyway; an operator adds people to "Key operators" by hand.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

TEAM_ADMINS = "Team admins"
KEY_OPERATORS = "Key operators"
KEY_PERMISSIONS = ["view_signingkey", "change_signingkey"]


def grant(Group, Permission) -> None:
    """Create "Key operators" with the key permissions, and take the change permission away
    from "Team admins". Also callable with the real models (tests recreate the groups)."""
    permissions = list(
        Permission.objects.filter(content_type__app_label="plans", codename__in=KEY_PERMISSIONS)
    )
    if len(permissions) != len(KEY_PERMISSIONS):
        raise RuntimeError(f"permissions not found: {KEY_PERMISSIONS}")
    operators, _ = Group.objects.get_or_create(name=KEY_OPERATORS)
    operators.permissions.add(*permissions)
    change = [p for p in permissions if p.codename == "change_signingkey"]
    for team_admins in Group.objects.filter(name=TEAM_ADMINS):
        team_admins.permissions.remove(*change)


def move_key_permissions(apps, schema_editor):
    # Permissions are normally created after the whole migrate run; create the keys' now.
    app_config = apps.get_app_config("plans")
    models_module = getattr(app_config, "models_module", None)
    app_config.models_module = models_module or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = models_module
    grant(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def give_back(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    change = Permission.objects.filter(
        content_type__app_label="plans", codename="change_signingkey"
    )
    for team_admins in Group.objects.filter(name=TEAM_ADMINS):
        team_admins.permissions.add(*change)
    Group.objects.filter(name=KEY_OPERATORS).delete()


class Migration(migrations.Migration):
    dependencies = [("members", "0003_admin_groups")]

    operations = [migrations.RunPython(move_key_permissions, give_back)]
