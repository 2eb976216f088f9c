"""The builders the PostgreSQL rules are written with: a trigger function, a refusal, a check.

They only build the parts every rule repeats (the ``RAISE ... USING ERRCODE =
'check_violation'`` refusal, a statement-level check, an immutability
trigger from its column list); each rule's own SQL stays in
:mod:`.postgresql`, readable as SQL.
"""

from __future__ import annotations

from . import Rule

__all__ = ["_check", "_function", "_immutable", "_refusal", "_refused_if_found"]


def _function(name: str, body: str, *, declare: str = "", custom_plans: bool = True) -> str:
    """The PL/pgSQL trigger function ``name``; ``custom_plans`` plans each query with its values."""
    plans = " SET plan_cache_mode = force_custom_plan" if custom_plans else ""
    variables = f"DECLARE\n{declare}\n" if declare else ""
    return (
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql{plans} AS $$\n"
        f"{variables}BEGIN\n{body}\nEND\n$$;"
    )


def _refusal(rule: str, message: str, *args: str) -> str:
    """``RAISE`` a ``check_violation`` that names the rule as the constraint broken."""
    arguments = "".join(f", {arg}" for arg in args)
    return (
        f"RAISE EXCEPTION '{message}'{arguments}\n"
        f"        USING ERRCODE = 'check_violation', CONSTRAINT = '{rule}', TABLE = TG_TABLE_NAME;"
    )


def _refused_if_found(rule: str, message: str, *args: str) -> str:
    """The end of a check whose query found an offending row (``FOUND``)."""
    return f"    IF FOUND THEN\n        {_refusal(rule, message, *args)}\n    END IF;\n    RETURN NULL;"


def _check(
    name: str, table: str, rows: str, query: str, refusal: tuple[str, ...], declare: str = ""
) -> Rule:
    """A check of the rows one ``INSERT`` added (``rows``), refusing when ``query`` finds one.

    ``refusal`` is the message and its arguments; ``declare`` the variables
    the query selects into.
    """
    return Rule(
        name,
        table,
        (
            _function(name, query + _refused_if_found(name, *refusal), declare=declare),
            f"CREATE TRIGGER {name} AFTER INSERT ON {table}"
            f" REFERENCING NEW TABLE AS {rows} FOR EACH STATEMENT EXECUTE FUNCTION {name}();",
        ),
    )


def _immutable(name: str, table: str, columns: tuple[str, ...], message: str, arg: str) -> Rule:
    """``columns`` never change once the row is stored: the insert-time checks stay true."""
    changed = "\n      OR ".join(
        f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in columns
    )
    return Rule(
        name,
        table,
        (
            _function(name, f"    {_refusal(name, message, arg)}\n    RETURN NEW;"),
            f"CREATE TRIGGER {name}\nBEFORE UPDATE OF {', '.join(columns)}"
            f" ON {table} FOR EACH ROW\nWHEN ({changed})\nEXECUTE FUNCTION {name}();",
        ),
    )
