"""deploy/kubernetes: every manifest is one the official client's models accept field for field."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient

from rvguard.contract import contract_from_mapping
from rvguard.gateway.keysfile import _validated

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
MODELS = {
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "Service"): "V1Service",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("apps/v1", "Deployment"): "V1Deployment",
}


def _docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(KUBE.glob("*.yaml")):
        out += [(path.name, d) for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return out


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in _docs() if d["kind"] == kind]


class _Answer:
    """What `ApiClient.deserialize` read before kubernetes 35: a response with JSON ``data``."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.data = json.dumps(doc)


def _model(doc: dict[str, Any]) -> Any:
    """The client's model of ``doc``, deserialised as an API answer would be."""
    kind = MODELS[doc["apiVersion"], doc["kind"]]
    api = ApiClient()
    if "content_type" in inspect.signature(api.deserialize).parameters:  # the client's newer generator
        return api.deserialize(json.dumps(doc), kind, "application/json")
    return api.deserialize(_Answer(doc), kind)


def _plain(doc: Any) -> Any:
    """The manifest as the API serialises it: stringData is write-only, kept; numbers as given."""
    return json.loads(json.dumps(doc))


@pytest.mark.parametrize(("name", "doc"), [d for d in _docs() if d[1]["kind"] != "PrometheusRule"])
def test_every_manifest_round_trips_through_the_clients_models(name: str, doc: dict[str, Any]) -> None:
    """A misspelt or misplaced field is dropped by the models: the round trip then differs."""
    model = _model(doc)
    back = ApiClient().sanitize_for_serialization(model)
    assert back == _plain(doc), name


def test_a_wrong_field_fails_the_round_trip() -> None:
    """The mutation: the check above catches a field the models do not know."""
    [deployment] = _by_kind("Deployment")
    bad = json.loads(json.dumps(deployment))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    assert ApiClient().sanitize_for_serialization(_model(bad)) != _plain(bad)


def test_the_deployment_probes_runs_non_root_and_takes_config_and_secrets() -> None:
    [deployment] = _by_kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    args = c["args"]
    assert volumes["contract"]["configMap"]["name"] == "rvguard-contract"
    assert args[1] == mounts["contract"] + "/contract.yaml"
    assert volumes["keys"]["secret"]["secretName"] == "rvguard-keys"
    assert args[args.index("--keys") + 1] == mounts["keys"] + "/keys.yaml"
    secrets = {s["metadata"]["name"]: s for s in _by_kind("Secret")}
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"]}
    for ref in env.values():
        assert ref["key"] in secrets[ref["name"]]["stringData"]
    assert "RVGUARD_UPSTREAM_API_KEY" in env and not any("key" in a.lower() and "=" in a for a in args)
    [service] = _by_kind("Service")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == c["ports"][0]["name"]


def test_the_configmap_and_keys_secret_hold_a_valid_contract_and_keys_file() -> None:
    [config] = _by_kind("ConfigMap")
    contract = contract_from_mapping(yaml.safe_load(config["data"]["contract.yaml"]))
    secrets = {s["metadata"]["name"]: s for s in _by_kind("Secret")}
    keys = _validated(yaml.safe_load(secrets["rvguard-keys"]["stringData"]["keys.yaml"]), "keys.yaml")
    assert set(keys.keys.values()) <= set(contract.tenants)
    json.loads(secrets["rvguard-keys"]["stringData"]["jwks.json"])


def test_the_prometheusrule_holds_the_rules_file_promtool_checks() -> None:
    """The CRD's shape (the Operator's schema: groups of name + rules) and the very groups of the rules
    file; after editing the rules, `python scripts/make_prometheusrule.py` writes it again."""
    [rule] = _by_kind("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["name"]
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"} and set(rule["spec"]) == {"groups"}
    rules_file = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rvguard-rules.yml").read_text())
    assert rule["spec"]["groups"] == rules_file["groups"], "run: python scripts/make_prometheusrule.py"
    allowed = {"record", "alert", "expr", "for", "labels", "annotations", "keep_firing_for"}
    for group in rule["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit"} and group["rules"]
        for r in group["rules"]:
            assert set(r) <= allowed and ("record" in r) != ("alert" in r) and isinstance(r["expr"], str)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_prometheusrule.py")], capture_output=True, check=False
    )
    assert done.returncode == 0


def _pip_lines(text: str) -> set[str]:
    return set(re.findall(r"pip install '[^']+'", text))


def test_the_containerfile_installs_the_readmes_line_and_says_how_to_build() -> None:
    recipe = (ROOT / "deploy" / "Containerfile").read_text()
    [line] = _pip_lines(recipe)
    assert f"RUN {line} " in recipe or recipe.count(f"RUN {line}\n") == 1
    assert line in _pip_lines((ROOT / "README.md").read_text())
    assert "USER 10001" in recipe
    notes = (ROOT / "deploy" / "README.md").read_text()
    assert "no container runtime" in notes
