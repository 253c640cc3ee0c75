"""The cost of the body checks at the edge (core/http.py), beside a bare ``json.loads``.

Every body is parsed by ``parse_json`` (depth limit, no NaN) and walked by
``value_problems`` (NUL, unpaired surrogates, infinite numbers). This prints, for a usual
``/api.php`` body and for one with a 1 MB prompt, the time of each, measured side by side
in one run (min of 7 rounds), and their ratio to ``json.loads``::

    .venv/bin/python bench/edge.py
"""

import json
import os
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from core.http import parse_json, value_problems  # noqa: E402

USUAL = {
    "api_key": "llmgw_" + "a" * 12 + "_" + "b" * 40,
    "model": "gemma3:270m",
    "prompt": "The capital of France is",
    "options": {"temperature": 0.2, "num_predict": 16, "stop": ["\n"]},
}
LARGE = {**USUAL, "prompt": "word " * 200_000}


def best(func, number: int) -> float:
    return min(timeit.repeat(func, number=number, repeat=7)) / number


def main() -> None:
    for name, body, number in (("usual body", USUAL, 20_000), ("1 MB prompt", LARGE, 20)):
        raw = json.dumps(body).encode()
        parsed = json.loads(raw)
        bare = best(lambda raw=raw: json.loads(raw), number)
        parse = best(lambda raw=raw: parse_json(raw), number)
        walk = best(lambda parsed=parsed: value_problems(parsed), number)
        print(
            f"{name} ({len(raw):,} bytes): json.loads {bare * 1e6:.1f} us; parse_json "
            f"{parse * 1e6:.1f} us ({parse / bare:.2f}x); value_problems {walk * 1e6:.1f} us "
            f"({walk / bare:.2f}x); both {(parse + walk) / bare:.2f}x"
        )


if __name__ == "__main__":
    main()
