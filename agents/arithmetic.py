"""Reading the arithmetic of a task written in plain words, as steps for the calculator.

A small model cannot multiply 17 by 23, and a base model does not ask for a tool. So the
task agent reads the arithmetic itself: :func:`plan` turns a task such as "Add 17 and 25,
then multiply by 3", "What is 15% of 80?" or "Half of 3 dozen" into calculator
expressions, one per step the task names (``17 + 25``, then ``P * 3`` where ``P`` is the
previous step's value). The agent runs each through the calculator tool, so every step is
recorded, and a task that is nothing but arithmetic is answered with the result.

What the reader does not understand it leaves alone: :func:`plan` returns None, and the
task goes to the model, whose answer is labelled as unchecked (``agents.task_agent``).
When arithmetic sits inside a task that asks for more ("Explain why 2 + 2 = 4"), the plan
is one step for the longest expression found, and not ``pure``: the model still answers.
"""

import ast
import re
from dataclasses import dataclass

PREVIOUS = "P"  # the previous step's value in a later step's expression

_UNITS = [
    *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    *("eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen"),
    *("eighteen", "nineteen"),
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_NUMBER_WORDS = {w: i for i, w in enumerate(_UNITS)} | {w: 20 + 10 * i for i, w in enumerate(_TENS)}
_WORD = "(?:" + "|".join(sorted([*_NUMBER_WORDS, *_SCALES], key=len, reverse=True)) + ")"
_WORD_RUN = re.compile(rf"\b{_WORD}(?:(?:\s+|-){_WORD})*\b")

# An operand: a number, the previous value, or a parenthesised expression made earlier.
_OPERAND = rf"(?:\d+(?:\.\d+)?|{PREVIOUS}|\([^()]*\))"
_N = f"({_OPERAND})"
_LIST = rf"({_OPERAND}(?:\s*(?:,|\band\b)\s*{_OPERAND})*\s*,?\s*and\s+{_OPERAND})"
_PCT = r"\s*(?:%|percent|per cent)"
_UP, _DOWN = r"(?:increase|raise)", r"(?:decrease|reduce|lower)"
_TAKE = r"(?:subtract|take(?: away| off)?|deduct|remove)"
_FRACTIONS = {"half": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5, "tenth": 10}
_FRACTION = "(" + "|".join(_FRACTIONS) + ")"
_A_FRACTION = rf"(?:a\s+|one\s+|1\s+)?{_FRACTION}\b"  # "by a third", "by half"
_REFERENCE = re.compile(
    r"\b(?:it|that|this|what(?:'s| is)? left|what remains|"
    r"the (?:result|answer|sum|total|product|difference|number|rest))\b"
)

# Phrases rewritten into expressions, again and again until none matches, so that nested
# phrases ("half of 3 dozen") are read from the inside out. ``{k}`` is the k-th operand.
_PHRASES: list[tuple[str, str]] = [
    (r"\ba dozen\b", "12"),
    (rf"{_N}\s+dozen\b", "({1} * 12)"),
    (rf"{_N}\s*(?:%|percent|per cent)\s+of\s+{_N}", "({1} * {2} / 100)"),
    (rf"\b{_UP}\s+{_N}\s+by\s+{_N}{_PCT}", "({1} * (100 + {2}) / 100)"),
    (rf"\b{_DOWN}\s+{_N}\s+by\s+{_N}{_PCT}", "({1} * (100 - {2}) / 100)"),
    (rf"\b{_UP}\s+{_N}\s+by\s+{_A_FRACTION}", "({1} + {1} / {2})"),
    (rf"\b{_DOWN}\s+{_N}\s+by\s+{_A_FRACTION}", "({1} - {1} / {2})"),
    (rf"\b{_UP}\s+{_N}\s+by\s+{_N}", "({1} + {2})"),
    (rf"\b{_DOWN}\s+{_N}\s+by\s+{_N}", "({1} - {2})"),
    (rf"\b(?:a\s+|1\s+)?{_FRACTION}\s+(?:of\s+)?(?:a\s+)?{_N}", "({2} / {1})"),
    (rf"{_N}\s+{_FRACTION}s\s+of\s+(?:a\s+)?{_N}", "({1} * {3} / {2})"),
    (rf"\b(?:double|twice)\s+(?:of\s+)?{_N}", "(2 * {1})"),
    (rf"\b(?:triple|thrice)\s+{_N}", "(3 * {1})"),
    (rf"\bquadruple\s+{_N}", "(4 * {1})"),
    (rf"\bhalve\s+{_N}", "({1} / 2)"),
    (rf"\b(?:cut|split|divide)\s+{_N}\s+in\s+half\b", "({1} / 2)"),
    (rf"\b(?:the\s+)?square root of\s+{_N}", "({1} ** 0.5)"),
    (rf"\b(?:the\s+)?square of\s+{_N}", "({1} ** 2)"),
    (rf"\b(?:the\s+)?cube of\s+{_N}", "({1} ** 3)"),
    (rf"\bsquare\s+{_N}", "({1} ** 2)"),
    (rf"\bcube\s+{_N}", "({1} ** 3)"),
    (rf"{_N}\s+squared\b", "({1} ** 2)"),
    (rf"{_N}\s+cubed\b", "({1} ** 3)"),
    (rf"\badd\s+{_N}\s+to\s+{_N}", "({2} + {1})"),
    (rf"\b{_TAKE}\s+{_N}\s+(?:away\s+|off\s+)?from\s+{_N}", "({2} - {1})"),
    (rf"\bmultiply\s+{_N}\s+(?:by|and|with|times)\s+{_N}", "({1} * {2})"),
    (rf"\bdivide\s+{_N}\s+by\s+{_N}", "({1} / {2})"),
    (rf"\b(?:the\s+)?difference between\s+{_N}\s+and\s+{_N}", "({1} - {2})"),
    (rf"\b(?:the\s+)?quotient of\s+{_N}\s+(?:and|by)\s+{_N}", "({1} / {2})"),
    (rf"{_N}\s+more than\s+{_N}", "({2} + {1})"),
    (rf"{_N}\s+less than\s+{_N}", "({2} - {1})"),
    (rf"{_N}\s+(?:to the power of|raised to(?: the power of)?)\s+{_N}", "({1} ** {2})"),
]
# Phrases over a list of operands ("the sum of 3, 4 and 5"): (pattern, joiner, average).
_LISTS: list[tuple[str, str, bool]] = [
    (rf"\b(?:add(?: up| together)?|sum(?: up)?|(?:the )?(?:sum|total) of)\s+{_LIST}", " + ", False),
    (rf"\b(?:multiply(?: together)?|(?:the\s+)?product of)\s+{_LIST}", " * ", False),
    # "What do 45 and 55 add up to?", "12 and 8 added together"
    (rf"{_LIST}\s+(?:(?:add(?:ed)?|sum(?:med)?) up(?: to)?|added together|combined)", " + ", False),
    (rf"{_LIST}\s+multiplied together", " * ", False),
    (rf"\b(?:the\s+)?(?:average|mean) of\s+{_LIST}", " + ", True),
]
# Operator words between operands, longest first so that "multiplied by" wins over "by".
_OPERATOR_WORDS = (
    (r"multiplied by", "*"),
    (r"divided by", "/"),
    (r"times", "*"),
    (r"plus", "+"),
    (r"minus", "-"),
    (r"over", "/"),
)
_SYMBOLS = {"\u00d7": "*", "\u00b7": "*", "\u00f7": "/", "\u2212": "-", "^": "**"}
# A later step that names no operand for the value it works on ("then multiply by 3"). Its
# operand is never the previous value itself: "subtract it from 100" is a phrase of its own.
_NOT_PREVIOUS = r"(\d+(?:\.\d+)?|\([^()]*\))"
_ON_PREVIOUS = [
    (rf"^(?:multiply|times)\s+(?:by\s+)?{_NOT_PREVIOUS}", f"({PREVIOUS} * {{1}})"),
    (rf"^(?:divide|divided)\s+by\s+{_NOT_PREVIOUS}", f"({PREVIOUS} / {{1}})"),
    (rf"^multiplied\s+by\s+{_NOT_PREVIOUS}", f"({PREVIOUS} * {{1}})"),
    (rf"^(?:add|plus)\s+{_NOT_PREVIOUS}", f"({PREVIOUS} + {{1}})"),
    (rf"^(?:subtract|minus|take away|take off|deduct)\s+{_NOT_PREVIOUS}", f"({PREVIOUS} - {{1}})"),
    (rf"^{_UP}\s+by\s+{_NOT_PREVIOUS}{_PCT}", f"({PREVIOUS} * (100 + {{1}}) / 100)"),
    (rf"^{_DOWN}\s+by\s+{_NOT_PREVIOUS}{_PCT}", f"({PREVIOUS} * (100 - {{1}}) / 100)"),
    (rf"^{_UP}\s+by\s+{_A_FRACTION}", f"({PREVIOUS} + {PREVIOUS} / {{1}})"),
    (rf"^{_DOWN}\s+by\s+{_A_FRACTION}", f"({PREVIOUS} - {PREVIOUS} / {{1}})"),
    (rf"^{_UP}\s+by\s+{_NOT_PREVIOUS}", f"({PREVIOUS} + {{1}})"),
    (rf"^{_DOWN}\s+by\s+{_NOT_PREVIOUS}", f"({PREVIOUS} - {{1}})"),
    (r"^(?:double|doubled|twice)$", f"(2 * {PREVIOUS})"),
    (r"^(?:triple|tripled)$", f"(3 * {PREVIOUS})"),
    (r"^(?:halve|halved|take half|half)$", f"({PREVIOUS} / 2)"),
    (r"^(?:square|squared)$", f"({PREVIOUS} ** 2)"),
    (r"^(?:cube|cubed)$", f"({PREVIOUS} ** 3)"),
]
# Where a task goes on to its next step.
_STEP_BREAK = re.compile(
    r"\s*(?:[,;]\s*)?\b(?:and\s+)?(?:then|after that|finally)\b[,:]?\s*"
    r"|\s*;\s*|\.\s+(?=[a-z])"
    r"|(?:\s*,\s*(?:and\s+)?|\s+and\s+)(?=(?:multiply|divide|add|subtract|double|halve|triple|square|"
    r"cube|take|deduct|increase|decrease|reduce|raise|lower|plus|minus|times|divided by|"
    r"multiplied by)\b)"
)
# Words that ask for the result and say nothing about it.
_FILLER = re.compile(
    r"\b(?:what(?:'s| is| are| do you get| does| would)?|how (?:much|many)(?: is| are| does)?|"
    r"please|calculate|compute|work out|figure out|find|evaluate|tell me|give me|when|do|"
    r"the (?:answer|result|value)(?: of| to)?|solve|can you|could you|you|get|if|"
    r"(?:start|begin)(?: with| at| from)?|take|equals?|make|is|are|come to|of|by|the|and|"
    r"result|answer|exactly|quickly|for me|i|want|to know|know|now|then|numbers?)\b"
    r"|[?!:,=]|\.(?!\d)"
)
_ARITHMETIC = re.compile(r"^[\d.()+\-*/%\sP]+$")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# An operator between numbers; a minus only with spaces (555-1234 is a phone number).
_OPERATOR = re.compile(r"[\dP]\s*\)?\s*(?:\*\*|//|[+*/%]|\s-\s)\s*\(?\s*[\dP]")


@dataclass(frozen=True)
class Plan:
    """Calculator expressions, one per step, ``P`` in a step being the previous value.
    ``pure``: the task asks for nothing but this arithmetic."""

    steps: list[str]
    pure: bool


def _number_value(words: str) -> int:
    total = current = 0
    for word in re.split(r"[\s-]+", words):
        if word in _SCALES:
            current = max(current, 1) * _SCALES[word]
            if _SCALES[word] > 100:
                total, current = total + current, 0
        else:
            current += _NUMBER_WORDS[word]
    return total + current


def _normalise(text: str) -> str:
    text = text.lower()
    for symbol, operator in _SYMBOLS.items():
        text = text.replace(symbol, operator)
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000
    text = re.sub(r"\b(hundred|thousand)\s+and\s+(?=[a-z])", r"\1 ", text)
    text = re.sub(r"\ba\s+(hundred|thousand|million)\b", r"one \1", text)
    text = _WORD_RUN.sub(lambda m: str(_number_value(m.group())), text)
    text = re.sub(r"(?<=\d)\s*%", "%", text)
    text = re.sub(r"(?<=[\d)])\s*x\s*(?=[\d(])", " * ", text)  # 3 x 4
    return " ".join(text.split())


def _operators(text: str) -> str:
    for words, operator in _OPERATOR_WORDS:
        text = re.sub(rf"(?<=[\d)P])\s*\b{words}\b\s*(?=[\d(P])", f" {operator} ", text)
    return text


def _substitute(match: re.Match, template: str) -> str:
    groups = [str(_FRACTIONS.get(g, g)) for g in match.groups()]
    return template.format(None, *groups)


def _rewrite(clause: str) -> str:
    changed = True
    while changed:
        changed = False
        for pattern, joiner, average in _LISTS:
            match = re.search(pattern, clause)
            if match:
                items = re.findall(_N, match.group(1))
                expression = "(" + joiner.join(items) + ")"
                if average:
                    expression = f"({expression} / {len(items)})"
                clause = clause[: match.start()] + expression + clause[match.end() :]
                changed = True
        for pattern, template in _PHRASES:
            new = re.sub(pattern, lambda m, t=template: _substitute(m, t), clause)
            changed, clause = changed or new != clause, new
        new = _operators(clause)
        changed, clause = changed or new != clause, new
    return clause


def _step(clause: str, *, first: bool) -> str | None:
    """One step's expression, or None when the clause is not only arithmetic."""
    if not first:
        clause = _REFERENCE.sub(PREVIOUS, clause)
        clause = re.sub(rf"\s+(?:to|from|with)\s+{PREVIOUS}$", "", clause)  # "add 5 to it"
        verbs = "multiply|divide|double|triple|halve|square|cube"
        clause = re.sub(rf"^({verbs})\s+{PREVIOUS}\b", r"\1", clause)
        clause = re.sub(rf"^(take\s+)?half of {PREVIOUS}$", "half", clause)
        for pattern, template in _ON_PREVIOUS:
            clause = re.sub(pattern, lambda m, t=template: _substitute(m, t), clause.strip())
    clause = _rewrite(clause)
    rest = " ".join(_FILLER.sub(" ", clause).split())
    if not rest or not _ARITHMETIC.match(rest) or (first and PREVIOUS in rest):
        return None
    try:
        ast.parse(rest.replace(PREVIOUS, "1"), mode="eval")
    except SyntaxError:
        return None
    return _bare(rest)


def _bare(expression: str) -> str:
    """``expression`` without parentheses around all of it."""
    while expression.startswith("(") and expression.endswith(")"):
        depth = 0
        for index, char in enumerate(expression):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and index < len(expression) - 1:
                return expression
        expression = expression[1:-1].strip()
    return expression


def _longest_expression(text: str) -> str | None:
    """The longest arithmetic expression in ``text`` with an operator between numbers."""
    best = None
    for match in re.finditer(r"[\d.()+\-*/%\s]+", text):
        candidate = " ".join(match.group().split()).strip(" .").strip("+*/%")
        if len(_NUMBER.findall(candidate)) < 2 or not _OPERATOR.search(candidate):
            continue
        try:
            ast.parse(candidate, mode="eval")
        except SyntaxError:
            continue
        if best is None or len(candidate) > len(best):
            best = candidate
    return best


def plan(task: str) -> Plan | None:
    """The task's arithmetic as calculator steps (see the module); None when there is none
    the reader understands."""
    text = _normalise(task)
    clauses = [c.strip(" ,.?!") for c in _STEP_BREAK.split(text) if c and c.strip(" ,.?!")]
    steps: list[str] = []
    for index, clause in enumerate(clauses):
        step = _step(clause, first=index == 0)
        if step is None:
            break
        steps.append(step)
    else:
        if any(_OPERATOR.search(s) or "**" in s for s in steps) and steps:
            return Plan(steps=_merge_numbers(steps), pure=True)
    expression = _longest_expression(_rewrite(text))
    return Plan(steps=[_bare(expression)], pure=False) if expression else None


def _merge_numbers(steps: list[str]) -> list[str]:
    """Steps without a bare number of their own: "start with 10, add 5" is one step."""
    merged: list[str] = []
    for step in steps:
        if merged and _NUMBER.fullmatch(merged[-1].strip("() ")):
            step = step.replace(PREVIOUS, merged.pop())
        merged.append(step)
    return merged


def numbers_in(text: str) -> list[str]:
    """The numbers of a text as the reader sees them: number words read as numbers,
    "1,000" as 1000."""
    return _NUMBER.findall(_normalise(text))


def arithmetic_expression(task: str) -> str | None:
    """The task's arithmetic as one expression when it is one step (tests, old callers)."""
    found = plan(task)
    return found.steps[0] if found and len(found.steps) == 1 else None


def format_value(value: float) -> str:
    """A number as a person writes it: 391, not 391.0; at most 10 significant decimals."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def operand(value: float) -> str:
    """A previous step's value as it goes into the next step's expression (exact)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        value = int(value)
    return f"({value!r})" if value < 0 else repr(value)
