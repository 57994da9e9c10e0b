"""The team foreign keys of the audit trail now name the team in its new app (teams/0001).

The table is still ``members_team``, so only the migration state changes: the foreign key
and its constraint in the database are left as they are.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0005_retention_redacted_at"),
        ("teams", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="auditchainhead",
                    name="team",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.PROTECT,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="auditrecord",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="audittoken",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
            ],
        ),
    ]
