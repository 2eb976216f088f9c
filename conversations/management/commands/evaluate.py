"""``manage.py evaluate``: replay a dataset on one or two profiles, score, print the table."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.exceptions import InvalidArgumentError
from conversations.models import Profile
from conversations.services.evaluation import evaluate, format_table, read_dataset, scorers

DEFAULT_SCORERS = ("exact_match", "contains", "json_schema", "tool_called")


def _profile(slug: str) -> Profile:
    found = Profile.objects.select_related("language_model__provider").filter(slug=slug).first()
    if found is None:
        raise CommandError(f"no profile {slug!r}")
    return found


class Command(BaseCommand):
    help = (
        "Replay each example of a JSON Lines dataset in a new evaluation conversation on "
        "--profile (and --against), run the scorers, store the scores and an Evaluation, "
        "and print per profile: the mean of each scorer, cost, latency p50/p95 and failures."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", help="A JSON Lines file: one example per line.")
        parser.add_argument("--profile", required=True, help="The profile to evaluate (slug).")
        parser.add_argument("--against", help="A second profile to compare with (slug).")
        parser.add_argument(
            "--scorer",
            action="append",
            dest="scorers",
            help=f"A scorer's name (repeatable; default: {', '.join(DEFAULT_SCORERS)}).",
        )
        parser.add_argument("--judge", help="The profile the llm_judge scorer asks (slug).")
        parser.add_argument("--concurrency", type=int, default=1, help="Replays at once.")
        parser.add_argument(
            "--user", help="Who owns the replays (username; default: the first superuser)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model().objects
        if options["user"]:
            owner = users.filter(username=options["user"]).first()
            if owner is None:
                raise CommandError(f"no user named {options['user']!r}")
        else:
            owner = users.filter(is_superuser=True).order_by("pk").first()
            if owner is None:
                raise CommandError("no superuser to own the replays; name one with --user")
        profiles = [_profile(options["profile"])]
        if options["against"]:
            profiles.append(_profile(options["against"]))
        judge = _profile(options["judge"]) if options["judge"] else None
        names = options["scorers"] or list(DEFAULT_SCORERS)
        if "llm_judge" in names and judge is None:
            raise CommandError("the llm_judge scorer needs --judge PROFILE")
        try:
            examples, digest = read_dataset(options["dataset"])
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {options['dataset']}: {exc}") from None
        try:
            report = evaluate(
                examples=examples,
                profiles=profiles,
                scorer_names=names,
                owner=owner,
                dataset=str(options["dataset"]).rsplit("/", 1)[-1],
                dataset_sha256=digest,
                judge=judge,
                concurrency=options["concurrency"],
            )
        except InvalidArgumentError as exc:
            known = ", ".join(scorers.names())
            raise CommandError(f"{exc} (scorers: {known})") from None
        evaluation = report.evaluation
        self.stdout.write(
            f"Evaluation {evaluation.pk}: {len(examples)} example(s) x {len(profiles)} "
            f"profile(s), dataset sha256 {digest[:12]}"
        )
        self.stdout.write(format_table(report))
