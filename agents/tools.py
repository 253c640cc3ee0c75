"""The tool registry: a tool is a Python callable with a name, a description and a JSON
schema of its arguments. A profile enables tools by name.

Tools are registered with :func:`tool`; the history tools live in ``conversations.tools``
and are registered when that app loads. A tool registered as ``pure`` (a computation that
touches no database) runs in a thread of its own with a time limit
(``agents.context.JobContext.call_tool``); every tool's result has a size limit.
"""

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonschema


class ToolError(Exception):
    """A tool could not do what it was asked; the message goes back to the model."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    pure: bool = False

    def describe(self) -> str:
        props = self.parameters.get("properties", {})
        args = ", ".join(f'"{name}": {spec.get("type", "any")}' for name, spec in props.items())
        return f"- {self.name}: {self.description} Arguments: {{{args}}}"

    def run(self, ctx: Any, arguments: dict[str, Any]) -> Any:
        try:
            jsonschema.validate(arguments, self.parameters)
        except jsonschema.ValidationError as exc:
            raise ToolError(f"Invalid arguments for {self.name}: {exc.message}") from None
        return self.func(ctx, **arguments)


REGISTRY: dict[str, Tool] = {}


def tool(name: str, description: str, parameters: dict[str, Any], *, pure: bool = False):
    """Registers the decorated ``func(ctx, **arguments)`` as a tool. ``pure``: it only
    computes (no database, no use of ``ctx``), so it can run in a thread of its own."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        parameters.setdefault("additionalProperties", False)
        REGISTRY[name] = Tool(
            name=name, description=description, parameters=parameters, func=func, pure=pure
        )
        return func

    return register


def enabled_tools(names: list[str]) -> list[Tool]:
    return [REGISTRY[name] for name in names if name in REGISTRY]


# The calculator refuses, before computing it, any number with more digits than this: a
# power such as ((9**99)**99)**99 would otherwise hold its worker (and the GIL) for minutes
# and gigabytes, and Python refuses to print an integer past 4,300 digits anyway.
MAX_DIGITS = 1000
_MAX_BITS = math.ceil(MAX_DIGITS * math.log2(10))
_LIMIT = 10**MAX_DIGITS

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_TOO_LARGE = f"The result would have more than {MAX_DIGITS:,} digits."


def _bits(value: float) -> float:
    """The binary digits of ``abs(value)`` (log2; math.log2 takes integers of any size)."""
    return math.log2(abs(value)) if abs(value) >= 1 else 0.0


def _check_size(op: ast.operator, left: float, right: float) -> None:
    """Refuses an operation whose result would be too large, before it is computed."""
    if isinstance(op, ast.Mult) and _bits(left) + _bits(right) > _MAX_BITS + 1:
        raise ToolError(_TOO_LARGE)
    if isinstance(op, ast.Pow) and abs(left) > 1 and right * _bits(left) > _MAX_BITS + 1:
        raise ToolError(_TOO_LARGE)


def _checked(value: float) -> float:
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("The result is too large for a number.")
    if isinstance(value, int) and (value.bit_length() > _MAX_BITS + 1 or abs(value) >= _LIMIT):
        raise ToolError(_TOO_LARGE)
    return value


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _checked(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        _check_size(node.op, left, right)
        return _checked(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ToolError("Only numbers and + - * / // % ** and parentheses are allowed.")


@tool(
    "calculator",
    "Evaluates an arithmetic expression exactly.",
    {
        "type": "object",
        "properties": {"expression": {"type": "string", "maxLength": 200}},
        "required": ["expression"],
    },
    pure=True,
)
def calculator(ctx: Any, expression: str) -> dict[str, Any]:
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ToolError("Not an arithmetic expression.") from None
    try:
        return {"expression": expression, "value": _evaluate(tree)}
    except ZeroDivisionError:
        raise ToolError("Division by zero.") from None
    except OverflowError:  # a float result, or an integer too large to divide as a float
        raise ToolError("The result is too large for a number.") from None
    except (RecursionError, MemoryError):
        raise ToolError("The expression is too complex.") from None


@tool(
    "current_time",
    "Returns the current UTC date and time.",
    {"type": "object", "properties": {}},
    pure=True,
)
def current_time(ctx: Any) -> dict[str, Any]:
    return {"utc": datetime.now(UTC).isoformat(timespec="seconds")}
