"""Evaluations: replay a dataset on profiles, score the answers, compare the totals.

``scorers`` holds the scorer registry (``@scorer``, apps' ``llm_scorers``
modules) and the built-in scorers, ``judge`` the LLM judge, ``runner`` the
replay itself and its table. It runs turns through the loop and stores
scores through ``feedback``, so it sits with the use cases above the loop.
"""

from .judge import JUDGE_PROMPT, llm_judge, parse_grade  # importing registers llm_judge
from .runner import EvaluationReport, ExampleResult, evaluate, format_table, read_dataset
from .scorers import (
    SCORERS_MODULE,
    Scorer,
    ScorerRegistry,
    ScoreValue,
    Scoring,
    autodiscover_scorers,
    contains,
    exact_match,
    json_schema,
    scorer,
    scorers,
    tool_called,
)

__all__ = [
    "JUDGE_PROMPT",
    "SCORERS_MODULE",
    "EvaluationReport",
    "ExampleResult",
    "ScoreValue",
    "Scorer",
    "ScorerRegistry",
    "Scoring",
    "autodiscover_scorers",
    "contains",
    "evaluate",
    "exact_match",
    "format_table",
    "json_schema",
    "llm_judge",
    "parse_grade",
    "read_dataset",
    "scorer",
    "scorers",
    "tool_called",
]
