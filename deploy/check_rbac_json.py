#!/usr/bin/env python3
"""Checks that deploy/rbac-rules.json says exactly what the Helm chart's RBAC templates grant.

rbac-rules.json is the machine-readable copy a Rust test reads (to check that every request the
controller makes in its end-to-end test is allowed); the chart's clusterrole.yaml (cluster-wide)
and role.yaml (the release namespace) are what a cluster enforces. This parses the two templates
(lines that are only a `{{ ... }}` action are dropped, inline actions become a placeholder, and
the rest is plain YAML), expands each rule into one grant per (API group, resource, subresource,
namespaced) with the union of its verbs, and compares that with the JSON, both ways.

    python3 deploy/check_rbac_json.py        # exits 0 and prints "rbac-rules.json matches ..."

Needs PyYAML (`pip install pyyaml`). No Helm, no cluster.
"""

import json
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "chart" / "dovetail" / "templates"
JSON_PATH = HERE / "rbac-rules.json"

# Template file -> whether its rules are namespaced (Role) or cluster-wide (ClusterRole).
SOURCES = {"clusterrole.yaml": ("ClusterRole", False), "role.yaml": ("Role", True)}

ORDER = ["get", "list", "watch", "create", "update", "patch", "delete"]

ACTION_LINE = re.compile(r"^\s*\{\{.*\}\}\s*$")
ACTION = re.compile(r"\{\{.*?\}\}")


def strip_template(text):
    """The template as plain YAML: whole-line actions dropped, inline ones replaced."""
    lines = []
    for line in text.splitlines():
        if ACTION_LINE.match(line):
            continue
        lines.append(ACTION.sub("TEMPLATED", line))
    return "\n".join(lines) + "\n"


def grants_of_template(path, kind, namespaced):
    doc = yaml.safe_load(strip_template(path.read_text()))
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise SystemExit(f"{path}: expected one {kind}, got {doc!r:.200}")
    grants = {}
    for i, rule in enumerate(doc.get("rules") or []):
        extra = set(rule) - {"apiGroups", "resources", "verbs"}
        if extra:
            # resourceNames / nonResourceURLs would narrow or widen a grant in a way the JSON
            # cannot say: refuse rather than mis-describe.
            raise SystemExit(f"{path}: rule {i} has {sorted(extra)}, which rbac-rules.json cannot express")
        for field in ("apiGroups", "resources", "verbs"):
            values = rule.get(field) or []
            if "*" in values:
                raise SystemExit(f"{path}: rule {i} uses a wildcard in {field}")
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                resource, _, sub = res.partition("/")
                key = (group, resource, sub or None, namespaced)
                grants.setdefault(key, set()).update(rule["verbs"])
    return grants


def chart_grants():
    grants = {}
    for name, (kind, namespaced) in SOURCES.items():
        for key, verbs in grants_of_template(TEMPLATES / name, kind, namespaced).items():
            grants.setdefault(key, set()).update(verbs)
    return grants


def json_grants():
    entries = json.loads(JSON_PATH.read_text())
    if not isinstance(entries, list):
        raise SystemExit(f"{JSON_PATH}: expected a JSON list")
    grants = {}
    for i, e in enumerate(entries):
        keys = {"apiGroup", "resource", "subresource", "verbs", "namespaced"}
        if set(e) != keys:
            raise SystemExit(f"{JSON_PATH}: entry {i} has keys {sorted(e)}, expected {sorted(keys)}")
        if not isinstance(e["namespaced"], bool) or not isinstance(e["verbs"], list):
            raise SystemExit(f"{JSON_PATH}: entry {i}: namespaced must be a bool, verbs a list")
        if e["subresource"] is not None and (not isinstance(e["subresource"], str) or not e["subresource"]):
            raise SystemExit(f"{JSON_PATH}: entry {i}: subresource must be a non-empty string or null")
        key = (e["apiGroup"], e["resource"], e["subresource"], e["namespaced"])
        if key in grants:
            raise SystemExit(f"{JSON_PATH}: entry {i} repeats {key}")
        if len(set(e["verbs"])) != len(e["verbs"]):
            raise SystemExit(f"{JSON_PATH}: entry {i} repeats a verb")
        grants[key] = set(e["verbs"])
    return grants


def show(key):
    group, resource, sub, namespaced = key
    name = resource + (f"/{sub}" if sub else "")
    return f"{group or 'core'}/{name} ({'Role' if namespaced else 'ClusterRole'})"


def main():
    chart, doc = chart_grants(), json_grants()
    problems = []
    for key in sorted(set(chart) | set(doc), key=lambda k: (k[3], k[0], k[1], k[2] or "")):
        a, b = chart.get(key), doc.get(key)
        if a is None:
            problems.append(f"{show(key)}: in rbac-rules.json but not in the chart")
        elif b is None:
            problems.append(f"{show(key)}: in the chart ({sorted(a)}) but not in rbac-rules.json")
        elif a != b:
            problems.append(f"{show(key)}: chart {sorted(a)} vs rbac-rules.json {sorted(b)}")
    if problems:
        print("rbac-rules.json and the chart disagree:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    print(f"rbac-rules.json matches the chart: {len(doc)} grants "
          f"({sum(not k[3] for k in doc)} cluster-wide, {sum(k[3] for k in doc)} namespaced)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
