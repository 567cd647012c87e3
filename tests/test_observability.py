"""deploy/observability: alert rules, the Grafana dashboard and the collector config are valid.

promtool is not installable here, so the checks are these: every PromQL
expression parses (promql-parser, the Rust parser Prometheus-compatible tools
use), every metric it names is one disco really exports (read from the
registries the code builds), and the files have the structure Prometheus,
Grafana and the collector load.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client import CollectorRegistry

from disco.bus import BusMetrics
from disco_gateway.a2a.grpc_binding import GrpcMetrics
from disco_gateway.push.metrics import PushMetrics
from disco_gateway.ratelimits import CallLimits
from disco_gateway.sessions.metrics import StreamMetrics
from disco_service._metrics import ServiceMetrics

ROOT = Path(__file__).resolve().parents[1]
OBSERVABILITY = ROOT / "deploy" / "observability"
ALERTS = yaml.safe_load((OBSERVABILITY / "prometheus" / "alerts.yml").read_text())
PROMETHEUS = yaml.safe_load((OBSERVABILITY / "prometheus" / "prometheus.yml").read_text())
DASHBOARD = json.loads((OBSERVABILITY / "grafana" / "dashboards" / "disco.json").read_text())
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())

# Series Prometheus itself adds to every scrape.
_SCRAPE_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def _exported_series() -> set[str]:
    """Every series name the services' /metrics and an agent's metrics port can carry."""
    registries = [ServiceMetrics("any").registry]
    bus_registry = CollectorRegistry()
    BusMetrics(bus_registry)
    registries.append(bus_registry)
    gateway_registry = CollectorRegistry()
    StreamMetrics(gateway_registry)
    PushMetrics(gateway_registry)
    GrpcMetrics(gateway_registry)
    CallLimits(tenant=[], anonymous=[], registry=gateway_registry)
    registries.append(gateway_registry)
    names = set(_SCRAPE_SERIES)
    for registry in registries:
        for family in registry.collect():
            if family.type == "counter":
                names |= {f"{family.name}_total", f"{family.name}_created"}
            elif family.type == "histogram":
                names |= {f"{family.name}_{suffix}" for suffix in ("bucket", "count", "sum")}
            else:
                names.add(family.name)
            names |= {sample.name for sample in family.samples}
    return names


EXPORTED = _exported_series()


def _selected_metrics(expr: str) -> set[str]:
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), pre_visit=visit)
    return names


def _rules() -> list[dict[str, Any]]:
    return [rule for group in ALERTS["groups"] for rule in group["rules"]]


def test_the_alert_rules_cover_lag_dead_letters_error_rate_and_liveness() -> None:
    metrics = {name for rule in _rules() for name in _selected_metrics(rule["expr"])}
    assert {
        "disco_bus_consumer_lag",
        "disco_bus_dead_lettered_total",
        "disco_bus_handler_failures_total",
        "disco_http_requests_total",
        "up",
        "disco_dependency_up",
    } <= metrics


@pytest.mark.parametrize("rule", _rules(), ids=lambda rule: str(rule["alert"]))
def test_each_alert_rule_is_well_formed_and_names_exported_metrics(rule: dict[str, Any]) -> None:
    assert set(rule) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}
    assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", rule["alert"])
    unknown = _selected_metrics(rule["expr"]) - EXPORTED
    assert not unknown, f"{rule['alert']} names metrics nothing exports: {sorted(unknown)}"
    if "for" in rule:
        assert promql_parser.parse_duration(rule["for"]).total_seconds() > 0
    assert rule["labels"]["severity"] in {"warning", "critical"}
    assert rule["annotations"]["summary"]
    # Templates name only labels the expression keeps.
    for label in re.findall(r"\$labels\.(\w+)", json.dumps(rule["annotations"])):
        assert label in rule["expr"] or label in {"instance", "job"}, label


def test_alert_names_are_unique_and_groups_named() -> None:
    names = [rule["alert"] for rule in _rules()]
    assert len(names) == len(set(names))
    assert all(group["name"] for group in ALERTS["groups"])


def test_a_broken_expression_is_refused_by_the_parser() -> None:
    with pytest.raises(ValueError, match="parenthesis"):
        promql_parser.parse("sum(rate(disco_bus_consumed_total[5m])")


def _panels() -> list[dict[str, Any]]:
    return [panel for panel in DASHBOARD["panels"] if panel["type"] != "row"]


def _grafana_to_promql(expr: str) -> str:
    # Grafana substitutes its variables before Prometheus sees the query.
    return expr.replace("$__rate_interval", "5m").replace("$group", ".*")


@pytest.mark.parametrize("panel", _panels(), ids=lambda panel: str(panel["title"]))
def test_each_dashboard_panel_queries_exported_metrics_with_valid_promql(
    panel: dict[str, Any],
) -> None:
    assert panel["targets"], panel["title"]
    for target in panel["targets"]:
        expr = _grafana_to_promql(target["expr"])
        assert "$" not in expr, f"unknown variable in {target['expr']!r}"
        unknown = _selected_metrics(expr) - EXPORTED
        assert not unknown, f"{panel['title']!r} names metrics nothing exports: {sorted(unknown)}"
        assert target["datasource"]["uid"] == "${datasource}"


def test_the_dashboard_layout_is_valid() -> None:
    assert DASHBOARD["uid"] == "disco"
    ids = [panel["id"] for panel in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
    variables = {variable["name"] for variable in DASHBOARD["templating"]["list"]}
    assert variables == {"datasource", "group"}


def test_prometheus_loads_the_alert_rules_compose_mounts() -> None:
    mounts = COMPOSE["services"]["prometheus"]["volumes"]
    mounted = {target.split(":")[1]: target.split(":")[0] for target in mounts}
    for rule_file in PROMETHEUS["rule_files"]:
        assert rule_file in mounted, rule_file
        assert (ROOT / mounted[rule_file]).is_file()
    jobs = {job["job_name"] for job in PROMETHEUS["scrape_configs"]}
    assert jobs == {"disco-services", "disco-agents"}
    services = PROMETHEUS["scrape_configs"][0]["static_configs"][0]["targets"]
    assert sorted(services) == ["gateway:8080", "memory:8082", "registry:8081", "tracker:8083"]


def test_the_collector_pipeline_uses_only_defined_components() -> None:
    config = yaml.safe_load((OBSERVABILITY / "otel-collector.yaml").read_text())
    for pipeline in config["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            for name in pipeline.get(kind, []):
                assert name in config[kind], f"{kind[:-1]} {name!r} is not defined"
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")


def test_every_file_the_observability_profile_mounts_exists() -> None:
    for name in ("otel-collector", "prometheus", "grafana"):
        service = COMPOSE["services"][name]
        assert service["profiles"] == ["observability"]
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert (ROOT / source).exists(), f"{name} mounts a missing {source}"
