"""Team, Role and Group, moved from ``members`` (docs/decisions/0062).

Their tables were created by members/migrations and keep their names (``members_team``,
``members_role``, ``members_group``, ``members_team_staff``): this migration only adds the
models to the ``teams`` state. members/migrations/0008 removes them from the ``members``
state and moves their content types, so permissions and the groups holding them stay.
"""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("members", "0007_team_retention_days"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Team",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("slug", models.SlugField(max_length=64, unique=True)),
                        ("name", models.CharField(max_length=200)),
                        (
                            "log_call_arguments",
                            models.BooleanField(
                                default=False,
                                help_text="Guards report call arguments in full instead of a digest.",
                            ),
                        ),
                        (
                            "revocation_bound_seconds",
                            models.PositiveSmallIntegerField(
                                default=15,
                                help_text="Running agents stop within this many seconds of a plan's revocation, a member's or agent's disabling, or a signing key's revocation: their guards poll the status feed twice as often.",
                                validators=[
                                    django.core.validators.MinValueValidator(1),
                                    django.core.validators.MaxValueValidator(60),
                                ],
                                verbose_name="revocation bound (seconds)",
                            ),
                        ),
                        (
                            "approval_window_seconds",
                            models.PositiveIntegerField(
                                default=3600,
                                help_text="How long a plan that a policy's review rule sent to a person waits for a decision; nobody deciding within it expires the request.",
                                validators=[
                                    django.core.validators.MinValueValidator(60),
                                    django.core.validators.MaxValueValidator(604800),
                                ],
                                verbose_name="approval window (seconds)",
                            ),
                        ),
                        (
                            "retention_days",
                            models.PositiveIntegerField(
                                default=400,
                                help_text="Guard decisions and refused attempts older than this many days are removed by the worker, after the retention export hook has had them; the audit trail keeps their place in its chain and records each removal.",
                                validators=[
                                    django.core.validators.MinValueValidator(1),
                                    django.core.validators.MaxValueValidator(3650),
                                ],
                                verbose_name="retention (days)",
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "staff",
                            models.ManyToManyField(
                                blank=True,
                                help_text="Admin users who manage this team in the console.",
                                related_name="plangate_teams",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "members_team",
                        "ordering": ["slug"],
                    },
                ),
                migrations.CreateModel(
                    name="Role",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=64)),
                        ("description", models.CharField(blank=True, max_length=200)),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="roles",
                                to="teams.team",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "members_role",
                        "ordering": ["team", "name"],
                    },
                ),
                migrations.CreateModel(
                    name="Group",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=64)),
                        ("description", models.CharField(blank=True, max_length=200)),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="groups",
                                to="teams.team",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "member group",
                        "db_table": "members_group",
                        "ordering": ["team", "name"],
                    },
                ),
                migrations.AddConstraint(
                    model_name="team",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("revocation_bound_seconds__gte", 1),
                            ("revocation_bound_seconds__lte", 60),
                        ),
                        name="team_revocation_bound_range",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="team",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("retention_days__gte", 1), ("retention_days__lte", 3650)
                        ),
                        name="team_retention_days_range",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="role",
                    constraint=models.UniqueConstraint(
                        fields=("team", "name"), name="unique_role_name_per_team"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="group",
                    constraint=models.UniqueConstraint(
                        fields=("team", "name"), name="unique_group_name_per_team"
                    ),
                ),
            ],
        ),
    ]
