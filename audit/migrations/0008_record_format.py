from django.db import migrations, models


class Migration(migrations.Migration):
    """Records written so far are format 1 (their hash covers no ``format``); new ones are
    written in format 2 (audit.chain.RECORD_FORMAT)."""

    dependencies = [
        ("audit", "0007_plan_delegated_kind"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditrecord",
            name="format",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AlterField(
            model_name="auditrecord",
            name="format",
            field=models.PositiveSmallIntegerField(default=2),
        ),
    ]
