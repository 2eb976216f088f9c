"""``manage.py check_providers [--ping]``: is every active profile usable?"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.models import Profile
from conversations.services.configuration import check_connection


class Command(BaseCommand):
    help = (
        "Validate every active profile (provider active, key reference resolves, model set); "
        "with --ping, send one tiny request to each (one attempt, no retries)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--ping", action="store_true", help="Send one tiny request per profile."
        )

    def handle(self, *args: Any, ping: bool = False, **options: Any) -> None:
        profiles = Profile.objects.filter(is_active=True).select_related("language_model__provider")
        failures = 0
        for profile in profiles.order_by("slug"):
            check = check_connection(profile=profile, send=ping)
            if not check.ok:
                failures += 1
                self.stdout.write(self.style.ERROR(f"{profile.slug}: {check.code}: {check.detail}"))
                continue
            self.stdout.write(self.style.SUCCESS(f"{profile.slug}: ok"))
        if failures:
            raise CommandError(f"{failures} profile(s) failed")
