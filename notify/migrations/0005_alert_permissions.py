"""What the admin groups may do with alerts and Slack.

* Team admins: their teams' alert rules (add, change, delete), the alerts and every
  delivery attempt (view), the team's Slack connection (add, change) and its Slack users.
* Auditors: read the rules, the alerts and their deliveries.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GRANTS: dict[str, set[tuple[str, str]]] = {
    "Team admins": {
        ("notify", "add_alertrule"),
        ("notify", "change_alertrule"),
        ("notify", "delete_alertrule"),
        ("notify", "view_alertrule"),
        ("notify", "view_alert"),
        ("notify", "view_alertdelivery"),
        ("notify", "add_teamslack"),
        ("notify", "change_teamslack"),
        ("notify", "view_teamslack"),
        ("notify", "add_slackuserlink"),
        ("notify", "change_slackuserlink"),
        ("notify", "delete_slackuserlink"),
        ("notify", "view_slackuserlink"),
    },
    "Auditors": {
        ("notify", "view_alertrule"),
        ("notify", "view_alert"),
        ("notify", "view_alertdelivery"),
    },
}


def grant(Group, Permission) -> None:
    """Top up the groups. Also callable with the real models (tests recreate the groups
    after a transactional test's flush)."""
    for name, wanted in GRANTS.items():
        permissions = list(
            Permission.objects.filter(
                content_type__app_label="notify",
                codename__in={codename for _, codename in wanted},
            )
        )
        missing = {codename for _, codename in wanted} - {p.codename for p in permissions}
        if missing:
            raise RuntimeError(f"permissions not found: {sorted(missing)}")
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*permissions)


def grant_permissions(apps, schema_editor):
    # Permissions are normally created after the whole migrate run; create them now.
    app_config = apps.get_app_config("notify")
    models_module = getattr(app_config, "models_module", None)
    app_config.models_module = models_module or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = models_module
    grant(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def revoke_permissions(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, wanted in GRANTS.items():
        group = Group.objects.filter(name=name).first()
        if group is not None:
            group.permissions.remove(
                *Permission.objects.filter(
                    content_type__app_label="notify",
                    codename__in={codename for _, codename in wanted},
                )
            )


class Migration(migrations.Migration):
    dependencies = [("notify", "0004_alerts")]

    operations = [migrations.RunPython(grant_permissions, revoke_permissions)]
