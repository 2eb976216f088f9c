"""The LLM judge: a named profile reads a rubric, the question and the answer, and gives a grade.

The judge's question is a conversation of its own (``kind="evaluation"``,
in the evaluation), run by the tool loop like any turn, so its model calls
are in the usage ledger with their tokens and cost.
"""

from __future__ import annotations

import re
from typing import Final

from conversations.models import Conversation

from ..loop.tool_loop import run_tool_loop
from .scorers import ScoreValue, Scoring, scorer

__all__ = ["JUDGE_PROMPT", "llm_judge", "parse_grade"]

JUDGE_PROMPT: Final = (
    "You grade an assistant's answer.\n\nRubric:\n{rubric}\n\nQuestion:\n{question}\n\n"
    "Answer:\n{answer}\n\nReply with one whole number from 0 (fails the rubric) to 10 "
    "(meets it fully), and nothing else."
)
"""What the judge is asked; ``{rubric}``, ``{question}`` and ``{answer}`` are filled in."""

DEFAULT_RUBRIC: Final = "The answer is correct, relevant and complete."

_GRADE = re.compile(r"\b(10|[0-9])\b")


def parse_grade(text: str) -> float | None:
    """The first grade 0-10 in ``text`` as a score from 0 to 1, else ``None``."""
    found = _GRADE.search(text)
    return int(found.group(1)) / 10 if found else None


def _question(scoring: Scoring) -> str:
    given = scoring.example.get("input")
    if isinstance(given, list) and given and isinstance(given[-1], dict):
        return str(given[-1].get("content", ""))
    return str(given or "")


@scorer
def llm_judge(scoring: Scoring) -> ScoreValue:
    """A grade from 0 to 1 by the ``--judge`` profile, against the example's ``rubric``."""
    judge = scoring.judge
    if judge is None:
        return None
    rubric = scoring.example.get("rubric") or DEFAULT_RUBRIC
    conversation = Conversation.objects.create(
        owner_id=scoring.run.conversation.owner_id,
        profile=judge,
        kind=Conversation.Kind.EVALUATION,
        evaluation=scoring.evaluation,
        title=f"Judge of run {scoring.run.pk}",
        metadata={"judges_run": str(scoring.run.pk)},
    )
    prompt = JUDGE_PROMPT.format(
        rubric=rubric, question=_question(scoring), answer=scoring.answer or "(no answer)"
    )
    provider_for = scoring.options.get("provider_for")
    provider = provider_for(judge) if callable(provider_for) else None
    run = run_tool_loop(conversation=conversation, content=prompt, profile=judge, provider=provider)
    grade = parse_grade(run.final_content)
    if grade is None:
        raise ValueError("the judge gave no grade from 0 to 10")
    return grade
