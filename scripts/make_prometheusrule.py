"""Write deploy/kubernetes/prometheusrule.yaml from deploy/prometheus/rvguard-rules.yml.

The PrometheusRule (the Prometheus Operator's CRD) carries the same groups as the rules file that
promtool checks; tests/gateway/test_kubernetes.py fails when they differ. Run after editing the
rules: ``python scripts/make_prometheusrule.py``.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "rvguard-rules.yml"
OUT = ROOT / "deploy" / "kubernetes" / "prometheusrule.yaml"
HEAD = """\
# Generated from deploy/prometheus/rvguard-rules.yml by scripts/make_prometheusrule.py: edit the rules
# file, then run the script. For the Prometheus Operator (kube-prometheus-stack: give the labels its
# ruleSelector asks for).
"""


def prometheus_rule() -> dict[str, object]:
    """The PrometheusRule holding the rules file's groups."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "rvguard", "labels": {"app.kubernetes.io/name": "rvguard"}},
        "spec": {"groups": groups},
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the PromQL expressions) as literal blocks, as the rules file writes them."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def main() -> None:
    """Write the manifest."""
    text = yaml.dump(prometheus_rule(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000)
    OUT.write_text(HEAD + text, encoding="utf-8")


if __name__ == "__main__":
    main()
