"""The tool registry: a tool is a Python callable with a name, a description and a JSON
schema of its arguments. A profile enables tools by name.

Tools are registered with :func:`tool`; the history tools live in ``conversations.tools``
and are registered when that app loads.
"""

import ast
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


def tool(name: str, description: str, parameters: dict[str, Any]):
    """Registers the decorated ``func(ctx, **arguments)`` as a tool."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        parameters.setdefault("additionalProperties", False)
        REGISTRY[name] = Tool(name=name, description=description, parameters=parameters, func=func)
        return func

    return register


def enabled_tools(names: list[str]) -> list[Tool]:
    return [REGISTRY[name] for name in names if name in REGISTRY]


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


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ToolError("Exponent too large.")
        return _BINARY[type(node.op)](left, right)
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


@tool(
    "current_time", "Returns the current UTC date and time.", {"type": "object", "properties": {}}
)
def current_time(ctx: Any) -> dict[str, Any]:
    return {"utc": datetime.now(UTC).isoformat(timespec="seconds")}
