"""Each guard decision stores the policy version it was made under (``decided_under``),
resolved by the server: the auditor's version filter then reads an index instead of
computing a rule per row over the plan's tokens.

The column is added empty, and the decisions already stored are resolved in batches, each
its own transaction (``atomic = False``), by the rule's one home,
``plans.decided_under.decided_under``. 0008 resolves what arrived meanwhile, makes the
column required and indexes it."""

import django.db.models.deletion
from django.db import migrations, models

from plans.decided_under import decisions_backfill


def backfill(apps, schema_editor):
    decisions_backfill(
        event_model=apps.get_model("plans", "PlanEvent"),
        token_model=apps.get_model("plans", "PlanToken"),
        plan_model=apps.get_model("plans", "Plan"),
        using=schema_editor.connection.alias,
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("plans", "0006_plan_event_timeline_index"),
        ("policies", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="planevent",
            name="decided_under",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="policies.policyversion",
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
