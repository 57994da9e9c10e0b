"""Auditors and team admins read the audit trail: view permissions on the records and on
their two filtered lists (refused attempts, activity), and on the unattributed refusal
counts. Nobody holds add, change or delete on them: the admin shows them read-only.

Audit tokens are left out on purpose: only superusers create, list and revoke them (see
docs/decisions/0027-audit-chain-and-records-api.md); their creation and revocation are
activity records that auditors do see.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUPS = ["Auditors", "Team admins"]
VIEWED = ["auditrecord", "refusedattempt", "activityrecord", "unattributedrefusal"]


def grant(Group, Permission) -> None:
    """Top up the groups with the audit view permissions. Also callable with the real
    models (tests recreate the groups after a transactional test's flush)."""
    codenames = [f"view_{model}" for model in VIEWED]
    permissions = list(
        Permission.objects.filter(content_type__app_label="audit", codename__in=codenames)
    )
    if len(permissions) != len(codenames):
        raise RuntimeError(f"permissions not found: {codenames}")
    for name in GROUPS:
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*permissions)


def grant_view_permissions(apps, schema_editor):
    # Permissions are normally created after the whole migrate run; create the audit's now.
    app_config = apps.get_app_config("audit")
    models_module = getattr(app_config, "models_module", None)
    app_config.models_module = models_module or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = models_module
    grant(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def take_back(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    permissions = Permission.objects.filter(
        content_type__app_label="audit", codename__in=[f"view_{model}" for model in VIEWED]
    )
    for group in apps.get_model("auth", "Group").objects.filter(name__in=GROUPS):
        group.permissions.remove(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0002_chain_tokens_and_lists"),
        ("members", "0004_key_operators"),
    ]

    operations = [migrations.RunPython(grant_view_permissions, take_back)]
