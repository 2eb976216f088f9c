"""Live events over Redis publish/subscribe.

``CONVERSATIONS["EVENTS_URL"] = "redis://host:6379/0"`` (or ``rediss://``,
``unix://``): the redis-py client, which Celery's Redis transport installs
too (or ``pip install 'django-llm-conversations[redis]'``). Each run has its
channel, ``conversations:events:<run id>``; Pub/Sub channels ignore the
database number, so ``?prefix=...`` in the URL (removed before connecting)
keeps two deployments sharing one Redis apart.

The listener thread owns its Pub/Sub connection: it alone sends ``SUBSCRIBE``
and ``UNSUBSCRIBE`` and reads, waiting at most ``wait_seconds`` for a message
so that it soon sees the runs to listen to change. A subscription is ready
when Redis confirmed its ``SUBSCRIBE``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .listener import ListeningBackend

__all__ = ["RedisBackend", "split_prefix"]

DEFAULT_PREFIX = "conversations:events:"


def split_prefix(url: str) -> tuple[str, str]:
    """``url`` without its ``prefix`` query parameter, and the channel prefix to use."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefix = next((value for key, value in query if key == "prefix"), "")
    rest = urlencode([(key, value) for key, value in query if key != "prefix"])
    return urlunsplit(parts._replace(query=rest)), DEFAULT_PREFIX + (f"{prefix}:" if prefix else "")


class RedisBackend(ListeningBackend):
    """Redis ``PUBLISH``/``SUBSCRIBE``."""

    scheme = "redis"
    wait_seconds = 0.02

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._address, self.prefix = split_prefix(url)
        self._pubsub: Any = None

    def _client(self) -> Any:
        import redis

        return redis.Redis.from_url(
            self._address, socket_connect_timeout=5, socket_timeout=5, health_check_interval=0
        )

    def channel(self, run_id: str) -> str:
        return f"{self.prefix}{run_id}"

    def _connect(self) -> None:
        # The connection opens with the first SUBSCRIBE (a failure there reconnects).
        self._pubsub_client = self._client()
        self._pubsub = self._pubsub_client.pubsub()

    def _disconnect(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            pubsub.close()
            self._pubsub_client.close()

    def _listen(self, runs: set[str]) -> None:
        self._pubsub.subscribe(*(self.channel(run) for run in sorted(runs)))

    def _unlisten(self, runs: set[str]) -> None:
        self._pubsub.unsubscribe(*(self.channel(run) for run in sorted(runs)))

    def _receive(self, timeout: float) -> list[str]:
        payloads: list[str] = []
        message = self._pubsub.get_message(timeout=timeout)
        while message is not None:
            kind = message.get("type")
            if kind == "message":
                data = message["data"]
                payloads.append(data.decode() if isinstance(data, bytes) else str(data))
            elif kind == "subscribe":
                channel = message["channel"]
                name = channel.decode() if isinstance(channel, bytes) else str(channel)
                self._confirmed({name.removeprefix(self.prefix)})
            message = self._pubsub.get_message(timeout=0)
        return payloads

    def _wake(self) -> None:
        """Nothing to do: the listener looks at its channels every ``wait_seconds``."""

    def _open_publisher(self) -> Any:
        return self._client()

    def _send(self, publisher: Any, run_id: str, payload: str) -> None:
        publisher.publish(self.channel(run_id), payload)

    def _close_publisher(self, publisher: Any) -> None:
        publisher.close()
