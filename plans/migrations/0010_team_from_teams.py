"""The team foreign key of plans.Plan now names the team in its new app (teams/0001).

The table is still ``members_team``, so only the migration state changes: the foreign key
and its constraint in the database are left as they are.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("plans", "0009_event_batch_credential"),
        ("teams", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="plan",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="plans",
                        to="teams.team",
                    ),
                ),
            ],
        ),
    ]
