"""Team, Role and Group leave the ``members`` state for ``teams`` (teams/migrations/0001).

No table changes: the models keep their tables. Member's and Agent's foreign keys now name
the models in ``teams``, and the three content types move to the ``teams`` label, so their
permissions (``teams.change_team``, ``teams.view_role``, ...) stay the same rows and the
groups that hold them ("Team admins", "Auditors", "Approvers") keep holding them.
"""

import django.db.models.deletion
from django.db import migrations, models

MOVED = ("team", "role", "group")


def _move_content_types(apps, source: str, target: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    for model in MOVED:
        old = ContentType.objects.filter(app_label=source, model=model).first()
        if old is None:
            continue  # a database that never had it: post_migrate creates the new one
        new = ContentType.objects.filter(app_label=target, model=model).first()
        if new is not None:
            # Created under the new label before this ran: keep the old rows (what groups
            # and the admin's log point at), giving them the new rows' holders.
            for permission in Permission.objects.filter(content_type=new):
                kept = Permission.objects.filter(
                    content_type=old, codename=permission.codename
                ).first()
                if kept is None:
                    permission.content_type = old
                    permission.save(update_fields=["content_type"])
                    continue
                for group in permission.group_set.all():
                    group.permissions.add(kept)
                for user in permission.user_set.all():
                    user.user_permissions.add(kept)
                permission.delete()
            new.delete()
        old.app_label = target
        old.save(update_fields=["app_label"])
    ContentType.objects.clear_cache()


def content_types_to_teams(apps, schema_editor):
    _move_content_types(apps, "members", "teams")


def content_types_to_members(apps, schema_editor):
    _move_content_types(apps, "teams", "members")


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("members", "0007_team_retention_days"),
        ("teams", "0001_initial"),
        # Every foreign key into the three models names them in teams before they go.
        ("audit", "0006_team_from_teams"),
        ("notify", "0003_team_from_teams"),
        ("plans", "0010_team_from_teams"),
        ("policies", "0002_team_from_teams"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="member",
                    name="role",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="members",
                        to="teams.role",
                    ),
                ),
                migrations.AlterField(
                    model_name="member",
                    name="groups",
                    field=models.ManyToManyField(
                        blank=True, related_name="members", to="teams.group"
                    ),
                ),
                migrations.AlterField(
                    model_name="member",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="members",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="agent",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="agents",
                        to="teams.team",
                    ),
                ),
                migrations.DeleteModel(name="Group"),
                migrations.DeleteModel(name="Role"),
                migrations.DeleteModel(name="Team"),
            ],
        ),
        migrations.RunPython(content_types_to_teams, content_types_to_members),
    ]
