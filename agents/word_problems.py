"""A word problem's arithmetic, read by the model and worked out by the calculator.

The reader of ``agents.arithmetic`` understands arithmetic said in words ("add 17 and 25"),
not a story around it ("A box holds 6 eggs. How many eggs are in 7 boxes?"). A small model
computes badly but can often write the calculation a story asks for. So when a task asks
for a quantity, holds numbers and the reader found nothing, the model is asked for the
calculation only, as one expression, after worked examples (one of each operation, so
that no wording, such as a price, leans towards one of them). An expression that uses
nothing but the task's own numbers (each at most as often as the task has it) runs through
the calculator, and the result is the answer, labelled as the model's reading: nothing
checks that the reading is the right one (``verified: false``). Any other expression is
dropped and the task goes on as any other task.
"""

import ast
import re
from collections import Counter

from agents.arithmetic import numbers_in

# What asks for a quantity.
_ASKS_QUANTITY = re.compile(
    r"\bhow (?:many|much|far|long|old|tall|heavy)\b|\b(?:in total|altogether|in all)\b"
    r"|\b(?:left|remain|remaining)\b|\b(?:each|per)\b.*\?",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_EXPRESSION = re.compile(r"^[\d.\s()+\-*/]+$")
_OPERATOR = re.compile(r"[+\-*/]")
READING_STOPS = ["\n"]
READING_TOKENS = 32
READING_PROMPT = (
    "Each task below is written as one arithmetic expression with its numbers.\n\n"
    "Task: Anna has 4 bags with 5 sweets in each. How many sweets does she have?\n"
    "Expression: 4 * 5\n\n"
    "Task: A shirt costs 30 euros and is 10 euros off. How much does it cost now?\n"
    "Expression: 30 - 10\n\n"
    "Task: Sam has 7 marbles and finds 5 more. How many marbles does he have now?\n"
    "Expression: 7 + 5\n\n"
    "Task: One notebook costs 3 dollars. How much do 8 notebooks cost?\n"
    "Expression: 3 * 8\n\n"
    "Task: 20 sweets are shared equally by 4 children. How many does each child get?\n"
    "Expression: 20 / 4\n\n"
    "Task: {task}\n"
    "Expression:"
)


def is_word_problem(task: str) -> bool:
    """Whether a task asks for a quantity and holds at least two numbers."""
    return bool(_ASKS_QUANTITY.search(task)) and len(numbers_in(task)) >= 2


def reading_prompt(task: str) -> str:
    return READING_PROMPT.format(task=" ".join(task.split()))


def expression_of(task: str, answer: str) -> str | None:
    """The model's expression when it is arithmetic on the task's own numbers, else None."""
    expression = " ".join(answer.strip().split("\n", 1)[0].split()).rstrip(" .=")
    if not expression or not _EXPRESSION.match(expression) or not _OPERATOR.search(expression):
        return None
    used = Counter(float(n) for n in _NUMBER.findall(expression))
    given = Counter(float(n) for n in numbers_in(task))
    if len(used) == 0 or used - given:
        return None
    try:
        ast.parse(expression, mode="eval")
    except SyntaxError:
        return None
    return expression
