"""A language model's prices, as the usage ledger charges them."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

__all__ = ["PRICE_FIELDS", "Prices"]

PRICE_FIELDS = (
    "input_price_per_million",
    "cached_input_price_per_million",
    "output_price_per_million",
    "reasoning_price_per_million",
    "web_search_price_per_call",
)
"""The language model's price fields, in the order of :class:`Prices`."""


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per million tokens (and per web search), as stored on a language model (``None``: unknown)."""

    input: Decimal | None = None
    """Uncached prompt tokens."""
    cached_input: Decimal | None = None
    """Prompt tokens served from the provider's cache (blank: ``input``)."""
    output: Decimal | None = None
    """Completion tokens that are not reasoning."""
    reasoning: Decimal | None = None
    """Reasoning tokens (blank: ``output``)."""
    currency: str = "USD"
    """ISO 4217 code of all the prices."""
    web_search: Decimal | None = None
    """One web search the provider ran itself (a price per call, not per million tokens)."""

    @classmethod
    def from_fields(cls, values: dict[str, Decimal | None], *, currency: str) -> Prices:
        """The prices from a language model's :data:`PRICE_FIELDS` values."""
        return cls(
            input=values["input_price_per_million"],
            cached_input=values["cached_input_price_per_million"],
            output=values["output_price_per_million"],
            reasoning=values["reasoning_price_per_million"],
            currency=currency,
            web_search=values.get("web_search_price_per_call"),
        )
