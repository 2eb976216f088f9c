"""The demo app's scorers: how an installed app adds one to ``manage.py evaluate``."""

from __future__ import annotations

from conversations.services.evaluation import ScoreValue, Scoring, scorer


@scorer
def short_answer(scoring: Scoring) -> ScoreValue:
    """The answer has at most the example's ``max_words`` words (50 when it names none)."""
    limit = scoring.example.get("max_words", 50)
    return len(scoring.answer.split()) <= int(limit)
