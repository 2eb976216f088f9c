"""Safe arithmetic: parse with ``ast`` and walk a whitelist of nodes; never ``eval``.

The input comes from a language model, which takes its cue from whoever wrote
the last message, so it is untrusted. Only numbers, ``+ - * / // % **`` (``^``
is read as ``**``), unary ``+``/``-`` and parentheses are evaluated. Length,
nesting, exponents and result size are bounded, because ``9**9**9`` is valid
arithmetic that would keep a worker busy for hours.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPONENT",
    "MAX_EXPRESSION_LENGTH",
    "MAX_RESULT_BITS",
    "evaluate",
]

Number = int | float

MAX_EXPRESSION_LENGTH = 200
"""Longest expression accepted, in characters."""
MAX_DEPTH = 100
"""Deepest nesting of operations (keeps the recursive walk far from Python's limit)."""
MAX_EXPONENT = 10_000
"""Largest exponent, in absolute value."""
MAX_RESULT_BITS = 3_000
"""Largest integer result or intermediate (about 900 decimal digits)."""

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_DIVISIONS = (ast.Div, ast.FloorDiv, ast.Mod)
_OPERATOR_SYMBOLS: dict[type[ast.AST], str] = {
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitAnd: "&",
    ast.Invert: "~",
    ast.Not: "not",
}
# Phrases for the nodes people (and models) most often try; anything else is
# named by its node type.
_NODE_PHRASES: dict[type[ast.AST], str] = {
    ast.Name: "names are",
    ast.Call: "function calls are",
    ast.Attribute: "attribute access is",
    ast.Subscript: "subscripts are",
    ast.Compare: "comparisons are",
    ast.BoolOp: "boolean operators are",
    ast.Lambda: "lambdas are",
    ast.IfExp: "conditional expressions are",
    ast.List: "lists are",
    ast.Tuple: "tuples are",
    ast.Dict: "dicts are",
    ast.Set: "sets are",
    ast.ListComp: "comprehensions are",
    ast.SetComp: "comprehensions are",
    ast.DictComp: "comprehensions are",
    ast.GeneratorExp: "comprehensions are",
    ast.NamedExpr: "assignments are",
    ast.JoinedStr: "strings are",
    ast.Starred: "starred expressions are",
}
_ALLOWED = "only numbers, + - * / // % ** (or ^), unary + and -, and parentheses"


def _not_allowed(subject: str, detail: str = "") -> ValueError:
    # ``subject`` carries its verb ("names are", "attribute access is").
    return ValueError(f"{subject} not allowed{detail} ({_ALLOWED})")


def _checked(value: Number) -> Number:
    if isinstance(value, int):
        if value.bit_length() > MAX_RESULT_BITS:
            raise ValueError("the result is too large")
        return value
    if math.isnan(value):
        raise ValueError("the result is not a number")
    if math.isinf(value):
        raise ValueError("the result is too large")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"the exponent is too large (at most {MAX_EXPONENT} in absolute value)")
    # Refuse before computing: the size is known from the logarithm, and
    # computing first is exactly the denial of service we are avoiding.
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base) > 1
        and exponent * math.log2(abs(base)) > MAX_RESULT_BITS
    ):
        raise ValueError("the result is too large")
    try:
        result = base**exponent
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("the result is too large") from None
    if isinstance(result, complex):
        raise ValueError("the result is not a real number")
    return _checked(result)


def _walk(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise ValueError(f"the expression is nested too deeply (at most {MAX_DEPTH} levels)")
    if isinstance(node, ast.Constant):
        value = node.value
        # bool is an int subclass; True + True is not arithmetic anyone meant.
        if isinstance(value, bool) or not isinstance(value, int | float):
            kind = "strings" if isinstance(value, str | bytes) else f"{type(value).__name__} values"
            raise _not_allowed(f"{kind} are")
        return _checked(value)
    if isinstance(node, ast.UnaryOp):
        unary = _UNARY.get(type(node.op))
        if unary is None:
            raise _not_allowed(f"operator {_OPERATOR_SYMBOLS.get(type(node.op), '?')} is")
        return _checked(unary(_walk(node.operand, depth + 1)))
    if isinstance(node, ast.BinOp):
        left = _walk(node.left, depth + 1)
        right = _walk(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        binary = _BINARY.get(type(node.op))
        if binary is None:
            raise _not_allowed(f"operator {_OPERATOR_SYMBOLS.get(type(node.op), '?')} is")
        if isinstance(node.op, _DIVISIONS) and right == 0:
            raise ValueError("division by zero")
        try:
            return _checked(binary(left, right))
        except OverflowError:
            raise ValueError("the result is too large") from None
    if isinstance(node, ast.Name):
        raise _not_allowed("names are", f": {node.id!r}")
    raise _not_allowed(_NODE_PHRASES.get(type(node), f"{type(node).__name__} expressions are"))


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; :class:`ValueError` saying why not otherwise."""
    if not isinstance(expression, str):
        raise ValueError("the expression must be a string")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ValueError(
            f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters ({len(expression)})"
        )
    # ``^`` means power on calculators. Replacing the text (rather than mapping
    # Python's xor node) gives it ``**``'s precedence: 2^3+1 is 9, not 2 xor 4.
    # Any ``^`` that meant something else sits in a construct the walk rejects.
    source = expression.strip().replace("^", "**")
    if not source:
        raise ValueError("the expression is empty")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError):
        raise ValueError("not a valid arithmetic expression") from None
    return _walk(tree.body, 0)
