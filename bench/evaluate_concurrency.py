"""``evaluate --concurrency``: wall time of one evaluation with 1 and with 4 replays at once.

Usage, from the repository root::

    .venv/bin/python bench/evaluate_concurrency.py [--database sqlite|postgres|both]
        [--examples 20] [--delay 0.05]

On a throwaway database (``bench/databases.py``), two profiles replay the
same dataset (``--examples`` questions, each answered after a tool call)
through ``conversations.services.evaluation.evaluate``; the "model" is a
scripted provider that waits ``--delay`` seconds per answer, as a remote
model would. The evaluation runs with ``concurrency=1`` and then ``4``; the
script prints both wall times, the speed-up and PASS when 4 is faster than 1
(MISS otherwise). It asserts nothing: the exit code is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import time

# bench/ is sys.path[0] when run as a script
from databases import add_database_options, describe_machine, run_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_database_options(parser)
    parser.add_argument("--examples", type=int, default=20, help="examples (20)")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per answer (0.05)")
    args = parser.parse_args(argv)
    passed = ["--examples", str(args.examples), "--delay", str(args.delay)]
    return run_bench(
        __file__,
        args,
        passed,
        label="evaluate",
        work=lambda where: bench(where, args.examples, args.delay),
    )


def bench(where: str, examples: int, delay: float) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from conversations.models import LanguageModel, Profile, Provider
    from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
    from conversations.services.evaluation import evaluate

    call_command("migrate", verbosity=0, interactive=False)
    owner = get_user_model().objects.create_user(username="evaluator")
    provider = Provider.objects.create(slug="demo", name="Demo", adapter=Provider.Adapter.DEMO)
    model = LanguageModel.objects.create(provider=provider, model_id="demo-model")
    profiles = [
        Profile.objects.create(slug=slug, name=slug, language_model=model, max_iterations=4)
        for slug in ("first", "second")
    ]
    cities = ["Paris", "Berlin", "London", "Leipzig", "Tokyo"]
    dataset = [
        {
            "input": f"Weather in {cities[n % 5]}?",
            "contains": [cities[n % 5]],
            "tool": {"name": "get_weather", "arguments": {"city": cities[n % 5]}},
        }
        for n in range(examples)
    ]

    def respond(messages, tools, options):
        question = next(m.content for m in reversed(messages) if m.role.value == "user")
        city = question.removeprefix("Weather in ").rstrip("?")
        if messages[-1].role.value == "tool":
            return scripted_text(f"Mild in {city}.")
        return scripted_calls(("get_weather", {"city": city}))

    def provider_for(profile):
        return ScriptedProvider([respond] * (4 * examples), delay=delay)

    print("\n".join(describe_machine(connection.vendor)))
    print(f"{examples} examples x 2 profiles, 2 answers each, {delay * 1000:.0f} ms per answer")
    timings = {}
    for concurrency in (1, 4):
        started = time.perf_counter()
        report = evaluate(
            examples=dataset,
            profiles=profiles,
            scorer_names=["contains", "tool_called"],
            owner=owner,
            concurrency=concurrency,
            provider_for=provider_for,
        )
        timings[concurrency] = time.perf_counter() - started
        failures = sum(1 for result in report.results if result.failed)
        print(f"concurrency {concurrency}: {timings[concurrency]:.2f} s, {failures} failure(s)")
    speedup = timings[1] / timings[4]
    verdict = "PASS" if timings[4] < timings[1] else "MISS"
    print(f"speed-up 4 vs 1: {speedup:.2f} x  {verdict} (4 faster than 1) [{where}]")


if __name__ == "__main__":
    raise SystemExit(main())
