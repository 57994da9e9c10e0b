"""Auditors and team admins read the differences a policy version tried in shadow recorded
(``view_shadowdifference``): the policy page counts them and links to their list. Nobody
holds add, change or delete on them: the admin shows them read-only."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUPS = ["Auditors", "Team admins"]
CODENAME = "view_shadowdifference"


def grant(Group, Permission) -> None:
    """Top up the groups with the view permission. Also callable with the real models
    (tests recreate the groups after a transactional test's flush)."""
    permission = Permission.objects.get(content_type__app_label="plans", codename=CODENAME)
    for name in GROUPS:
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(permission)


def grant_view_permission(apps, schema_editor):
    # Permissions are normally created after the whole migrate run; create the plans' now.
    app_config = apps.get_app_config("plans")
    models_module = getattr(app_config, "models_module", None)
    app_config.models_module = models_module or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = models_module
    grant(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def take_back(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    permissions = Permission.objects.filter(content_type__app_label="plans", codename=CODENAME)
    for group in apps.get_model("auth", "Group").objects.filter(name__in=GROUPS):
        group.permissions.remove(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("plans", "0013_shadow_differences"),
        ("members", "0004_key_operators"),
    ]

    operations = [migrations.RunPython(grant_view_permission, take_back)]
