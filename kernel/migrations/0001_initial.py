"""The rate-limit counters' table, now the kernel's.

It was created by an app that is now wiring only (``controlplane``, migration
``0001_rate_limit_windows``). A database migrated back then has the table under its old
name: it is renamed, counters and all; a new database gets it created.
"""

from django.db import migrations, models

OLD_TABLE = "controlplane_ratelimitwindow"


def create_or_adopt(apps, schema_editor):
    model = apps.get_model("kernel", "RateLimitWindow")
    existing = schema_editor.connection.introspection.table_names()
    if OLD_TABLE in existing:
        schema_editor.alter_db_table(model, OLD_TABLE, model._meta.db_table)
    else:
        schema_editor.create_model(model)


def drop(apps, schema_editor):
    schema_editor.delete_model(apps.get_model("kernel", "RateLimitWindow"))


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RateLimitWindow",
                    fields=[
                        (
                            "bucket",
                            models.CharField(max_length=200, primary_key=True, serialize=False),
                        ),
                        ("window_end", models.BigIntegerField(db_index=True)),
                        ("hits", models.PositiveIntegerField(default=0)),
                    ],
                ),
            ],
        ),
        migrations.RunPython(create_or_adopt, drop),
    ]
