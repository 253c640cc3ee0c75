"""The Grafana dashboard and the Prometheus rules of deploy/ name only metrics the service
exposes (core.metrics), with their labels."""

import json
import re
from pathlib import Path

import yaml

from tests.test_metrics import FAMILIES

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
_NAME = re.compile(r"\b(llmgw_[a-z_]+)")
_BY = re.compile(r"by \(([^)]*)\)")
_SELECTOR = re.compile(r"\{([^}]*)\}")


def exposed() -> dict[str, set[str]]:
    """Every series name the service exposes (the issue's table, tests/test_metrics.py
    checks it against /metrics), with its labels."""
    names: dict[str, set[str]] = {}
    for name, (kind, labels) in FAMILIES.items():
        if kind == "histogram":
            for suffix in ("_bucket", "_count", "_sum"):
                names[name + suffix] = labels | {"le"}
        else:
            names[name] = labels
    return names


def expressions() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana/dashboards/llmgw.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    exprs += [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    return exprs


def test_every_expression_names_exposed_metrics_and_their_labels():
    names = exposed()
    for expr in expressions():
        used = _NAME.findall(expr)
        for name in used:
            assert name in names, (name, expr)
        labels = set().union(*(names[name] for name in used)) if used else set()
        for group in _BY.findall(expr):
            assert {g.strip() for g in group.split(",")} <= labels, expr
        for selector in _SELECTOR.findall(expr):
            for matcher in filter(None, (m.strip() for m in selector.split(","))):
                label = re.split(r"[!=~]", matcher, maxsplit=1)[0]
                assert label in labels or label == "job", expr


def test_the_alert_rules_cover_runtime_errors_queue_wait_and_5xx():
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    exprs = " ".join(rule["expr"] for group in rules["groups"] for rule in group["rules"])
    for needed in (
        "llmgw_runtime_requests_total",
        "llmgw_job_queue_wait_seconds_bucket",
        'status=~"5.."',
    ):
        assert needed in exprs
    config = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    assert config["scrape_configs"][0]["metrics_path"] == "/metrics"
