"""What the evaluation tests share: a dataset of twenty examples and providers that answer it."""

from __future__ import annotations

from conversations.domain import Usage
from conversations.exceptions import ProviderError
from conversations.models import LanguageModel, Profile
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text

CAPITALS = {
    "France": "Paris",
    "Germany": "Berlin",
    "Italy": "Rome",
    "Spain": "Madrid",
    "Japan": "Tokyo",
}


def dataset() -> list[dict]:
    """Twenty examples: capitals (exact and contains), JSON answers and a weather tool call."""
    examples: list[dict] = []
    for number in range(20):
        country = list(CAPITALS)[number % len(CAPITALS)]
        kind = number % 4
        if kind == 0:
            examples.append(
                {"input": f"Capital of {country}? One word.", "expected": CAPITALS[country]}
            )
        elif kind == 1:
            examples.append(
                {
                    "input": f"Tell me about the capital of {country}.",
                    "contains": [CAPITALS[country]],
                }
            )
        elif kind == 2:
            examples.append(
                {
                    "input": f"JSON with the capital of {country}.",
                    "schema": {
                        "type": "object",
                        "properties": {"capital": {"type": "string"}},
                        "required": ["capital"],
                    },
                }
            )
        else:
            examples.append(
                {
                    "input": f"Weather in the capital of {country}?",
                    "tool": {"name": "get_weather", "arguments": {"city": CAPITALS[country]}},
                }
            )
    return examples


def _country(text: str) -> str:
    return next(country for country in CAPITALS if country in text)


def answering(*, sloppy: bool = False, failing: str | None = None, delay: float = 0.0):
    """A scripted provider that answers the dataset: right, or ``sloppy`` (wrong on purpose).

    A question containing ``failing`` gets a provider error instead of an answer.
    """

    def respond(messages, tools, options):
        last = messages[-1]
        question = next(m.content for m in reversed(messages) if m.role.value == "user")
        if failing and failing in question:
            raise ProviderError("the model is overloaded")
        capital = CAPITALS[_country(question)]
        usage = Usage(prompt_tokens=10, completion_tokens=3)
        if last.role.value == "tool":
            return scripted_text(f"It is mild in {capital}.", usage=usage)
        if question.startswith("Weather"):
            city = "Nowhere" if sloppy else capital
            return scripted_calls(("get_weather", {"city": city}), usage=usage)
        if question.startswith("JSON"):
            return scripted_text(
                "not json" if sloppy else f'{{"capital": "{capital}"}}', usage=usage
            )
        if question.startswith("Capital"):
            return scripted_text("I do not know" if sloppy else capital, usage=usage)
        return scripted_text(f"The capital is {'unknown' if sloppy else capital}.", usage=usage)

    return ScriptedProvider([respond] * 200, delay=delay)


def second_profile(profile: Profile, slug: str = "sloppy") -> Profile:
    return Profile.objects.create(
        slug=slug,
        name=slug.title(),
        language_model=LanguageModel.objects.get(pk=profile.language_model_id),
        max_iterations=4,
    )
