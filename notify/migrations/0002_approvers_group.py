"""The "Approvers" group, and what the admin groups may do with approvals.

* Approvers: read what auditors read (the plans, their tokens and decisions, members,
  agents, policies: what a request's page links to), see the approval queue, and decide
  (``notify.decide_approval``, a permission of the queue's proxy model, so no ``plans``
  migration is needed; docs/decisions/0037).
* Team admins: the same, plus their team's webhook (add, change) and its deliveries.
* Auditors: read the queue, the webhook and its deliveries; decide nothing.

Who decides for which team is still ``Team.staff``: an approver sees and decides on the
plans of the teams they are staff of, and never on a plan made for themselves.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

APPROVERS = "Approvers"

GRANTS: dict[str, set[tuple[str, str]]] = {
    APPROVERS: {
        ("plans", "view_plan"),
        ("plans", "view_plantoken"),
        ("notify", "view_approvalrequest"),
        ("notify", "decide_approval"),
    },
    "Team admins": {
        ("notify", "view_approvalrequest"),
        ("notify", "decide_approval"),
        ("notify", "add_teamwebhook"),
        ("notify", "change_teamwebhook"),
        ("notify", "view_teamwebhook"),
        ("notify", "view_webhookdelivery"),
    },
    "Auditors": {
        ("notify", "view_approvalrequest"),
        ("notify", "view_teamwebhook"),
        ("notify", "view_webhookdelivery"),
    },
}


def grant(Group, Permission) -> None:
    """Create the Approvers group and top up the others. Also callable with the real
    models (tests recreate the groups after a transactional test's flush)."""
    for name, wanted in GRANTS.items():
        permissions = [
            permission
            for permission in Permission.objects.select_related("content_type").filter(
                content_type__app_label__in={app for app, _ in wanted},
                codename__in={codename for _, codename in wanted},
            )
            if (permission.content_type.app_label, permission.codename) in wanted
        ]
        missing = wanted - {(p.content_type.app_label, p.codename) for p in permissions}
        if missing:
            raise RuntimeError(f"permissions not found: {sorted(missing)}")
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*permissions)
    # Approvers read what auditors read: a request's page links the member, the agent,
    # the policy version and the plan's decisions.
    approvers = Group.objects.get(name=APPROVERS)
    approvers.permissions.add(*Group.objects.get(name="Auditors").permissions.all())


def create_group(apps, schema_editor):
    # Permissions are normally created after the whole migrate run; create them now.
    for label in ("plans", "notify"):
        app_config = apps.get_app_config(label)
        models_module = getattr(app_config, "models_module", None)
        app_config.models_module = models_module or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = models_module
    grant(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def remove_group(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    Group.objects.filter(name=APPROVERS).delete()
    notify_permissions = Permission.objects.filter(content_type__app_label="notify")
    for group in Group.objects.filter(name__in=[name for name in GRANTS if name != APPROVERS]):
        group.permissions.remove(*notify_permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0001_webhooks_and_queue"),
        ("members", "0004_key_operators"),
        ("audit", "0003_audit_view_permissions"),
    ]

    operations = [migrations.RunPython(create_group, remove_group)]
