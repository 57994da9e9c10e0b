"""``decided_under`` becomes required and indexed, in the list's order: the decisions made
under one version, newest first, are read from ``plan_event_version``.

In one transaction: on PostgreSQL the table is first locked against writes, so that no
decision stored by a process still running the code before 0007 slips in unresolved; the
decisions that arrived since 0007 are resolved (by the same rule, ``decisions_backfill``),
then the column is made NOT NULL and indexed."""

import django.db.models.deletion
from django.db import migrations, models

from plans.decided_under import decisions_backfill


def backfill_the_rest(apps, schema_editor):
    event_model = apps.get_model("plans", "PlanEvent")
    if schema_editor.connection.vendor == "postgresql":
        table = schema_editor.quote_name(event_model._meta.db_table)
        schema_editor.execute(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE")
    decisions_backfill(
        event_model=event_model,
        token_model=apps.get_model("plans", "PlanToken"),
        plan_model=apps.get_model("plans", "Plan"),
        using=schema_editor.connection.alias,
    )
    if schema_editor.connection.vendor == "postgresql":
        # The foreign key's checks are deferred; run them now, or the ALTER TABLE below
        # is refused ("pending trigger events").
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("plans", "0007_plan_event_decided_under"),
    ]

    operations = [
        migrations.RunPython(backfill_the_rest, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="planevent",
            name="decided_under",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="policies.policyversion",
            ),
        ),
        migrations.AddIndex(
            model_name="planevent",
            index=models.Index(
                fields=["decided_under", "occurred_at", "id"], name="plan_event_version"
            ),
        ),
    ]
