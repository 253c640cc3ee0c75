"""The apps are layers, and imports only run down them: core <- gateway <- agents <-
conversations <- backoffice (``config`` wires them and nothing imports it but itself and
``config.env``, the settings helpers). Checked by reading every import of every module,
those inside functions included."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("core", "gateway", "agents", "conversations", "backoffice")


def imported_packages(path: Path) -> set[str]:
    """The top-level packages that the module at ``path`` imports, wherever it does."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def modules_of(app: str) -> list[Path]:
    return sorted((ROOT / app).rglob("*.py"))


@pytest.mark.parametrize("app", LAYERS)
def test_an_app_imports_no_app_of_a_layer_above_it(app):
    above = set(LAYERS[LAYERS.index(app) + 1 :])
    wrong = {
        f"{path.relative_to(ROOT)} imports {package}"
        for path in modules_of(app)
        for package in imported_packages(path) & above
    }
    assert not wrong


@pytest.mark.parametrize("app", LAYERS)
def test_an_app_imports_nothing_of_config_but_its_settings_helpers(app):
    wrong = set()
    for path in modules_of(app):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            wrong.update(
                f"{path.relative_to(ROOT)} imports {name}"
                for name in names
                if name.split(".")[0] == "config" and name != "config.env"
            )
    assert not wrong


def test_the_layer_check_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("def prune():\n    from gateway.models import UsageRecord\n")
    assert imported_packages(module) == {"gateway"}
