"""The house style's size limits, checked: no app file over 400 lines and no app function
(methods and nested functions included) over 60. App code is every module of the apps,
``config`` and ``scripts``; migrations are generated and stay aside, as do tests and
benchmarks. One case per file, so a failure names the file that grew."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP_DIRS = ("core", "gateway", "agents", "conversations", "backoffice", "config", "scripts")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def app_modules() -> list[Path]:
    return sorted(
        path
        for folder in APP_DIRS
        for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.relative_to(ROOT).parts
    )


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name (N lines)`` for each function of ``source`` longer than ``limit`` lines,
    counted from its ``def`` line to its last line (decorators not counted)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append(f"{node.name} ({length} lines)")
    return found


MODULES = app_modules()
IDS = [str(path.relative_to(ROOT)) for path in MODULES]


@pytest.mark.parametrize("path", MODULES, ids=IDS)
def test_an_app_file_has_at_most_400_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_FILE_LINES


@pytest.mark.parametrize("path", MODULES, ids=IDS)
def test_an_app_function_has_at_most_60_lines(path):
    assert long_functions(path.read_text()) == []


def test_the_app_modules_are_found_and_migrations_left_aside():
    assert "agents/services/__init__.py" in IDS
    assert "config/settings.py" in IDS
    assert not any("/migrations/" in name for name in IDS)


def test_the_function_check_counts_methods_and_async_functions():
    body = "".join(f"    x = {n}\n" for n in range(60))
    source = f"class A:\n    def short(self):\n        pass\n\n    async def long(self):\n{body}"
    source = source.replace("\n    x", "\n        x")
    assert long_functions(source) == ["long (61 lines)"]
