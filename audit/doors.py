"""The doors that say who acts (``audit.actors.acting_as``), once, for every write behind them.

* the admin: ``ActorMiddleware`` names the signed-in staff user by username (the name a
  policy version's author is shown by too);
* management commands: ``AuditedCommand`` names ``manage.py <command>``, or what
  ``--actor`` says (``make run`` passes ``--actor "make run"`` to its seeding);
* Celery tasks: ``AuditedTask`` names ``celery <task name>``.

Anything else (an agent's API request, a shell) acts as "" unless it says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Task
from django.core.management.base import BaseCommand, CommandParser
from django.http import HttpRequest, HttpResponse

from .actors import acting_as


def person_actor(user: Any) -> str:
    """How the activity log names a signed-in person: the username, unique and the same
    one the admin's own history and the policy versions' author show."""
    return str(user.get_username())


def command_actor(command_name: str) -> str:
    return f"manage.py {command_name}"


def task_actor(task_name: str) -> str:
    return f"celery {task_name}"


class ActorMiddleware:
    """Every write of a request by signed-in staff (the admin) is theirs.

    After ``AuthenticationMiddleware``. The person is looked up only when a write asks for
    the actor: a request that writes nothing (``/healthz``, JWKS, an agent's API call)
    never touches the session, so it keeps answering while the database is away.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with acting_as(lambda: request_actor(request)):
            return self.get_response(request)


def request_actor(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    # On the API, DRF puts its authenticated caller here (an Agent, an AuditToken): no staff.
    if user is not None and user.is_authenticated and getattr(user, "is_staff", False):
        return person_actor(user)
    return ""


class AuditedCommand(BaseCommand):
    """A management command whose writes are recorded as ``manage.py <its name>``.

    ``--actor NAME`` records another name instead: the person who ran it, or the tool that
    runs it for someone (``make run``). It claims nothing more than running the command
    already allows, since whoever runs ``manage.py`` holds the database's credentials.
    """

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument(
            "--actor",
            help=f"who the activity log names for this command's changes; default "
            f"{command_actor(subcommand)!r}",
        )
        return parser

    def command_name(self) -> str:
        # Django names a command by its module, management/commands/<name>.py.
        return self.__module__.rsplit(".", 1)[-1]

    def execute(self, *args: Any, **options: Any) -> str | None:
        actor = options.get("actor") or command_actor(self.command_name())
        with acting_as(actor):
            return super().execute(*args, **options)


class AuditedTask(Task):
    """A Celery task (``@shared_task(base=AuditedTask, ...)``) whose writes are recorded as
    ``celery <task name>``: whether beat or a caller queued it, the task is what acted."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with acting_as(task_actor(self.name)):
            return super().__call__(*args, **kwargs)
