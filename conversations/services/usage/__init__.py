"""Usage: the ledger of model calls, prices, budgets, and OpenTelemetry tracing.

``ledger`` records one row per provider request, priced at the run's prices
(``prices``); ``budgets`` checks a call against its budgets before it is made
(reserving its estimated cost) and charges them after; ``tracing`` emits
spans and metrics when the OpenTelemetry API is installed.
"""

from .budgets import BudgetCheck, BudgetStatus, budget_statuses, check_budgets, period_bounds
from .ledger import call_cost
from .prices import Prices

__all__ = [
    "BudgetCheck",
    "BudgetStatus",
    "Prices",
    "budget_statuses",
    "call_cost",
    "check_budgets",
    "period_bounds",
]
