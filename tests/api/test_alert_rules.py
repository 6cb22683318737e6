"""deploy/prometheus/alerts.yml: complete Prometheus rules that name only what /metrics
exports."""

from __future__ import annotations

import re
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.api.test_metrics import scrape
from tests.conftest import ROOT

ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"

# What an alert rule must hold, and the names an expression may use beside the families'.
RULE_KEYS = {"alert", "expr", "for", "labels", "annotations"}
SUFFIXES = ("", "_total", "_bucket", "_sum", "_count")


async def test_every_alert_rule_is_complete_and_uses_only_exported_metrics(
    client: httpx.AsyncClient,
):
    assert (await client.get("/queue")).status_code == 200  # a latency to export
    exported = {
        family.name + suffix
        for family in text_string_to_metric_families(await scrape(client))
        for suffix in SUFFIXES
    }
    rules: list[dict[str, Any]] = [
        rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]
    ]
    assert {r["alert"] for r in rules} >= {
        "ClusterManagerGpuTypeUnserved",
        "ClusterManagerQueueWaitLong",
        "ClusterManagerDispatchErrors",
        "ClusterManagerFailureRatioHigh",
        "ClusterManagerApiSlow",
    }
    for rule in rules:
        assert set(rule) == RULE_KEYS, rule["alert"]
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        used = set(re.findall(r"\bcluster_manager_[a-z0-9_]+", rule["expr"]))
        assert used, rule["alert"]
        assert used <= exported, f"{rule['alert']} uses {used - exported}"
