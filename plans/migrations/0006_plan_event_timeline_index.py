"""A plan's decisions in time order from one index, (plan, occurred_at, id): the plan's
page, its timeline's first and last rows and the decisions list searched by plan id read
it instead of walking every decision by time. It leads with the plan, so it replaces the
foreign key's own index (and its LIKE twin, which no exact lookup needs): the biggest
table keeps the same number of indexes to write."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("plans", "0005_retention_decisions_removed_before"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="planevent",
            index=models.Index(fields=["plan", "occurred_at", "id"], name="plan_event_timeline"),
        ),
        migrations.AlterField(
            model_name="planevent",
            name="plan",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="events",
                to="plans.plan",
            ),
        ),
    ]
