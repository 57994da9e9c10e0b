"""The team foreign key of policies.Policy now names the team in its new app (teams/0001).

The table is still ``members_team``, so only the migration state changes: the foreign key
and its constraint in the database are left as they are.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("policies", "0001_initial"),
        ("teams", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="policy",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="policies",
                        to="teams.team",
                    ),
                ),
            ],
        ),
    ]
