"""The embedded broker of `make run`: kombu's filesystem transport, with whole messages.

kombu's own ``_put`` creates a message file under its final name and then writes it, so a
worker listing the folder in between takes an empty file, fails to decode it and stops
(kombu issue #1551; `make run` lost its worker to it after minutes under load). Here a
message is written under a name no reader looks at and renamed into place with
``os.replace``: a reader sees no file or the whole message. A file that still cannot be
decoded (one written by another writer, a disk that filled up) is skipped with a warning
instead of stopping the worker. Settings name this transport by its module path
(``CELERY_BROKER_TRANSPORT``) whenever the broker URL is ``filesystem://``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

logger = logging.getLogger(__name__)

#: How a message being written is named: the reader keeps only names whose text after the
#: first dot is ``<queue>.msg``, and this one's is ``<uuid>.writing``.
_WRITING = ".{id}.writing"


class Channel(filesystem.Channel):
    # kombu's abstract channel calls the message `message`, its filesystem one `payload`.
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Write the message aside, then rename it into the queue's folder in one step."""
        # kombu's own name: the order of the folder's sorted listing is the queue's order.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        folder = self.data_folder_out
        final = os.path.join(folder, name)
        writing = os.path.join(folder, _WRITING.format(id=uuid.uuid4()))
        try:
            with open(writing, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(writing, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(writing)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        """The next message that decodes; an empty or broken file is skipped (it has
        already left the queue's folder: kombu moves a file out before reading it)."""
        while True:
            try:
                return super()._get(queue)
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                logger.warning(
                    "skipped an unreadable message in queue %s of the embedded broker: %s",
                    queue,
                    exc,
                )


class Transport(filesystem.Transport):
    Channel = Channel

    def __init__(self, client: Any, **kwargs: Any) -> None:
        # A folder has no host; kombu names it "localhost" anyway, with a warning at every
        # connection, which `make run` would show on the terminal: name it first.
        client.hostname = client.hostname or "localhost"
        super().__init__(client, **kwargs)
