"""Finding the arithmetic in a task, so that the agent can work it out with the calculator.

A small base model cannot multiply 17 by 23, and does not ask for a tool. For a profile
of such a model (prompt style ``transcript``), the task agent looks for an arithmetic
expression in the task itself, lets the calculator tool evaluate it before the model
call, and puts the result in the prompt, as it does with retrieval in a chat.
"""

import ast
import re

# Words for operators, longest first so that "multiplied by" wins over "by".
_WORDS = (
    (r"to the power of", "**"),
    (r"multiplied by", "*"),
    (r"divided by", "/"),
    (r"times", "*"),
    (r"plus", "+"),
    (r"minus", "-"),
    (r"over", "/"),
    (r"squared", "**2"),
    (r"cubed", "**3"),
)
_SYMBOLS = {"\u00d7": "*", "\u00b7": "*", "\u00f7": "/", "\u2212": "-", "^": "**"}
# A run of numbers, operators, parentheses and spaces.
_RUN = re.compile(r"[\d.()+\-*/%\s]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# An operator between numbers; a minus only with spaces (555-1234 is a phone number).
_OPERATOR = re.compile(r"\d\s*\)?\s*(?:\*\*|//|[+*/%]|\s-\s)\s*\(?\s*\d")


def _normalise(text: str) -> str:
    for symbol, operator in _SYMBOLS.items():
        text = text.replace(symbol, operator)
    text = re.sub(r"(?<=[\d)])\s*[xX]\s*(?=[\d(])", " * ", text)  # 3 x 4
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000
    for words, operator in _WORDS:
        text = re.sub(rf"(?<=[\d)\s]){words}(?=[\s(\d]|$)", f" {operator} ", text, flags=re.I)
    return text


def arithmetic_expression(task: str) -> str | None:
    """The longest arithmetic expression in ``task`` that Python's grammar accepts, with
    at least one operator between numbers; None when there is none."""
    best = None
    for match in _RUN.finditer(_normalise(task)):
        candidate = " ".join(match.group().split()).strip(" .")
        candidate = candidate.strip("+*/%")
        if len(_NUMBER.findall(candidate)) < 2 or not _OPERATOR.search(candidate):
            continue
        try:
            ast.parse(candidate, mode="eval")
        except SyntaxError:
            continue
        if best is None or len(candidate) > len(best):
            best = candidate
    return best


def format_value(value: float) -> str:
    """A number as a person writes it: 391, not 391.0; at most 10 significant decimals."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)
