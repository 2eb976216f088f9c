"""``manage.py rebuild_search_index``: reinstall and refill the message search index."""

from typing import Any

from django.core.management.base import BaseCommand
from django.db import connection

from conversations.selectors.search import search_config
from conversations.services.transcript import rebuild_search_index


class Command(BaseCommand):
    help = (
        "Install the search function again with CONVERSATIONS['SEARCH_CONFIG'] (PostgreSQL) "
        "and recompute the index of every message. Run it after changing that setting."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        rebuild_search_index()
        if connection.vendor == "postgresql":
            done = f"search index rebuilt with text search configuration {search_config()!r}"
        else:
            done = "search index rebuilt"
        self.stdout.write(self.style.SUCCESS(done))
