#!/usr/bin/env python3
"""Checks deploy/crds/ (the CustomResourceDefinitions of Karpenter's objects) and the example
objects of the repository against them.

    python3 deploy/check_crds.py [REPO_ROOT]     # exits 0 and prints a one-line summary
    python3 deploy/check_crds.py --self-test     # shows that bad objects and schemas are refused
    python3 deploy/check_crds.py --objects F...  # validates the objects in files F (what a test
                                                 # saw the controller write), as errors

1. Each of the four CRD files parses and says what it must: apiextensions.k8s.io/v1, its group,
   names (plural, singular, kind, listKind, shortNames, categories [karpenter]), scope Cluster,
   one version that is served and stored, the status subresource, the printer columns, and a
   *structural* schema (Kubernetes' rules: every node has a type unless it is int-or-string or
   keeps unknown fields; no type, default, description or additionalProperties inside
   allOf/anyOf/oneOf/not; arrays have one items schema; at the root, metadata restricts nothing
   but name and generateName; list-type map keys are required scalars; defaults are valid), with
   patterns that compile and no keyword Kubernetes does not know.
2. deploy/chart/dovetail/crds/ holds exactly the same four files, byte for byte.
3. Every NodePool, NodeClaim, EC2NodeClass and NodeOverlay document in the YAML files under
   data/, examples/ and deploy/ (multi-document; other kinds are skipped, and so are files with
   `{{`, i.e. Helm templates) validates against its CRD: apiVersion served, types, enums,
   required fields (a missing one with a default is fine), minimum / maximum, lengths, item and
   property counts, patterns, date-time, list-type set / map uniqueness -- and every field it
   sets is declared in the schema. An undeclared field is an error even where the schema keeps
   unknown fields (x-kubernetes-preserve-unknown-fields): that is how the schemas are known to
   cover what users write. Cross-field CEL rules are not in the schemas and not checked.
   Documents under tests/ are validated too, but only reported as warnings: test fixtures may
   be deliberately partial.

Needs PyYAML (`pip install pyyaml`). No cluster, no Helm.
"""

import copy
import re
import sys
from pathlib import Path

import yaml

CRD_DIR = Path("deploy") / "crds"
CHART_CRD_DIR = Path("deploy") / "chart" / "dovetail" / "crds"
SCAN_DIRS = ("data", "examples", "deploy")
WARN_DIRS = ("tests",)

# file -> what the CRD must declare
EXPECTED = {
    "karpenter.sh_nodepools.yaml": {
        "group": "karpenter.sh", "kind": "NodePool", "plural": "nodepools",
        "singular": "nodepool", "version": "v1", "shortNames": None,
        "columns": ["NodeClass", "Nodes", "Ready", "Age"],
    },
    "karpenter.sh_nodeclaims.yaml": {
        "group": "karpenter.sh", "kind": "NodeClaim", "plural": "nodeclaims",
        "singular": "nodeclaim", "version": "v1", "shortNames": None,
        "columns": ["Type", "Capacity", "Zone", "Node", "Ready", "Age"],
    },
    "karpenter.k8s.aws_ec2nodeclasses.yaml": {
        "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "plural": "ec2nodeclasses",
        "singular": "ec2nodeclass", "version": "v1", "shortNames": ["ec2nc", "ec2ncs"],
        "columns": ["Ready", "Age"],
    },
    "karpenter.sh_nodeoverlays.yaml": {
        "group": "karpenter.sh", "kind": "NodeOverlay", "plural": "nodeoverlays",
        "singular": "nodeoverlay", "version": "v1alpha1", "shortNames": ["overlays"],
        "columns": ["Ready", "Age"],
    },
}

TYPES = {"object", "array", "string", "integer", "number", "boolean"}
SCALARS = {"string", "integer", "number", "boolean"}
JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
# The JSONSchemaProps keywords apiextensions.k8s.io/v1 accepts (less $ref / definitions /
# dependencies / patternProperties / additionalItems, which CRDs may not use).
KEYWORDS = {
    "type", "format", "title", "description", "default", "example", "externalDocs", "nullable",
    "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties",
    "maxProperties", "required", "properties", "additionalProperties", "items",
    "allOf", "anyOf", "oneOf", "not",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type", "x-kubernetes-validations",
}
INT_RANGES = {"int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1)}
DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
# Go's regexp (RE2) has no look-around and no back-references.
NOT_RE2 = re.compile(r"\(\?[=!]|\(\?<[=!]|\\[1-9]")
PRINTER_TYPES = {"integer", "number", "string", "boolean", "date"}


# ------------------------------------------------------------------------------------- YAML
class Loader(yaml.SafeLoader):
    """Safe YAML that keeps timestamps as strings (kubectl sends them as JSON strings) and
    refuses duplicate keys."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)):
            continue  # an unhashable key: construct_mapping refuses it below
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_all(text):
    return [d for d in yaml.load_all(text, Loader=Loader) if d is not None]


# ------------------------------------------------------------------------- structural check
def check_pattern(pattern, where, errs):
    if not isinstance(pattern, str):
        errs.append(f"{where}: pattern is not a string")
        return
    if NOT_RE2.search(pattern):
        errs.append(f"{where}: pattern {pattern!r} uses look-around or a back-reference, "
                    "which Kubernetes' regexp (RE2) refuses")
    try:
        re.compile(pattern)
    except re.error as e:
        errs.append(f"{where}: pattern {pattern!r} does not compile: {e}")


def is_int_or_string_anyof(node):
    """The one junctor with types that structural schemas allow, beside int-or-string."""
    members = node.get("anyOf")
    return (node.get("x-kubernetes-int-or-string") is True and isinstance(members, list)
            and sorted(tuple(sorted(m.items())) for m in members if isinstance(m, dict))
            == [(("type", "integer"),), (("type", "string"),)])


def structural(node, where, errs, junctor=False, root=False):
    """Appends to errs every way the schema node at `where` is not structural (or not valid)."""
    if not isinstance(node, dict):
        errs.append(f"{where}: a schema must be a mapping, got {type(node).__name__}")
        return
    for key in node:
        if key not in KEYWORDS:
            errs.append(f"{where}: unknown schema keyword {key!r}")
    if node.get("uniqueItems") is True:
        errs.append(f"{where}: uniqueItems: true is not allowed in a CRD (use "
                    "x-kubernetes-list-type: set)")
    t = node.get("type")
    ios = node.get("x-kubernetes-int-or-string") is True
    keep = node.get("x-kubernetes-preserve-unknown-fields") is True
    if junctor:
        for key in ("type", "default", "description", "additionalProperties", "nullable",
                    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string",
                    "x-kubernetes-embedded-resource", "x-kubernetes-list-type",
                    "x-kubernetes-list-map-keys", "x-kubernetes-map-type"):
            if key in node:
                errs.append(f"{where}: {key} is not allowed inside allOf/anyOf/oneOf/not")
    else:
        if t is None and not ios and not keep:
            errs.append(f"{where}: no type (needed unless x-kubernetes-int-or-string or "
                        "x-kubernetes-preserve-unknown-fields)")
        if t is not None and t not in TYPES:
            errs.append(f"{where}: unknown type {t!r}")
        if ios and t is not None:
            errs.append(f"{where}: x-kubernetes-int-or-string must have no type")
    if root and t != "object":
        errs.append(f"{where}: the root must be type: object")
    if "properties" in node and "additionalProperties" in node:
        errs.append(f"{where}: properties and additionalProperties are mutually exclusive")
    if "properties" in node:
        if not isinstance(node["properties"], dict):
            errs.append(f"{where}: properties must be a mapping")
        else:
            if t not in (None, "object"):
                errs.append(f"{where}: properties on a non-object ({t})")
            for name, sub in node["properties"].items():
                sub_where = f"{where}.{name}"
                if root and name == "metadata":
                    check_root_metadata(sub, sub_where, errs)
                    continue
                structural(sub, sub_where, errs, junctor=junctor)
    if "additionalProperties" in node:
        ap = node["additionalProperties"]
        if isinstance(ap, dict):
            if t not in (None, "object"):
                errs.append(f"{where}: additionalProperties on a non-object ({t})")
            structural(ap, f"{where}.*", errs, junctor=junctor)
        elif ap is not True:
            errs.append(f"{where}: additionalProperties must be a schema")
    if t == "array" and "items" not in node and not junctor:
        errs.append(f"{where}: an array needs an items schema")
    if "items" in node:
        if isinstance(node["items"], list):
            errs.append(f"{where}: items must be one schema, not a list")
        elif t not in (None, "array"):
            errs.append(f"{where}: items on a non-array ({t})")
        else:
            structural(node["items"], f"{where}[]", errs, junctor=junctor)
    required = node.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            errs.append(f"{where}: required must be a list of names")
        elif not junctor:
            for r in required:
                if r not in (node.get("properties") or {}):
                    errs.append(f"{where}: required field {r!r} is not among its properties")
    if "pattern" in node:
        check_pattern(node["pattern"], where, errs)
    if "enum" in node:
        if not isinstance(node["enum"], list) or not node["enum"]:
            errs.append(f"{where}: enum must be a non-empty list")
        elif not junctor:
            for v in node["enum"]:
                problems = []
                validate(v, {k: x for k, x in node.items() if k != "enum"}, "enum", problems)
                if problems:
                    errs.append(f"{where}: enum value {v!r} does not fit the schema: "
                                f"{problems[0]}")
    for lo, hi in (("minimum", "maximum"), ("minLength", "maxLength"), ("minItems", "maxItems"),
                   ("minProperties", "maxProperties")):
        if lo in node and hi in node and node[lo] > node[hi]:
            errs.append(f"{where}: {lo} {node[lo]} is above {hi} {node[hi]}")
    if "default" in node and not junctor:
        problems = []
        validate(node["default"], node, "default", problems)
        if problems:
            errs.append(f"{where}: the default does not validate: {problems[0]}")
    lt = node.get("x-kubernetes-list-type")
    if lt is not None:
        items = node.get("items") if isinstance(node.get("items"), dict) else {}
        if t != "array":
            errs.append(f"{where}: x-kubernetes-list-type on a non-array")
        elif lt == "set":
            if items.get("type") not in SCALARS:
                errs.append(f"{where}: a list-type set needs scalar items")
        elif lt == "map":
            keys = node.get("x-kubernetes-list-map-keys")
            props = items.get("properties") or {}
            if items.get("type") != "object" or not keys:
                errs.append(f"{where}: a list-type map needs object items and "
                            "x-kubernetes-list-map-keys")
            for k in keys or []:
                sub = props.get(k)
                if sub is None or sub.get("type") not in SCALARS:
                    errs.append(f"{where}: list-map key {k!r} must be a scalar property")
                elif k not in (items.get("required") or []) and "default" not in sub:
                    errs.append(f"{where}: list-map key {k!r} must be required or defaulted")
        elif lt != "atomic":
            errs.append(f"{where}: unknown x-kubernetes-list-type {lt!r}")
    if "x-kubernetes-list-map-keys" in node and lt != "map":
        errs.append(f"{where}: x-kubernetes-list-map-keys without x-kubernetes-list-type: map")
    for j in JUNCTORS:
        if j not in node:
            continue
        if j == "anyOf" and is_int_or_string_anyof(node):
            continue
        members = [node[j]] if j == "not" else node[j]
        if not isinstance(members, list):
            errs.append(f"{where}.{j}: must be a list")
            continue
        for i, m in enumerate(members):
            structural(m, f"{where}.{j}[{i}]", errs, junctor=True)
            for name in (m.get("properties") or {}) if isinstance(m, dict) else ():
                if name not in (node.get("properties") or {}):
                    errs.append(f"{where}.{j}[{i}]: property {name!r} is not declared "
                                "outside the junctor")


def check_root_metadata(node, where, errs):
    """At the root, metadata may only restrict name and generateName."""
    if not isinstance(node, dict):
        errs.append(f"{where}: must be a mapping")
        return
    extra = set(node) - {"type", "properties"}
    if extra:
        errs.append(f"{where}: only type and properties (name, generateName) are allowed, "
                    f"not {sorted(extra)}")
    if node.get("type") != "object":
        errs.append(f"{where}: must be type: object")
    for name, sub in (node.get("properties") or {}).items():
        if name not in ("name", "generateName"):
            errs.append(f"{where}.{name}: metadata restricts only name and generateName")
            continue
        if not isinstance(sub, dict) or sub.get("type") != "string" or \
                set(sub) - {"type", "pattern", "maxLength", "minLength", "description"}:
            errs.append(f"{where}.{name}: only a string type, pattern and length are allowed")


def check_crd(fname, doc, expected):
    """Errors of one CRD document; returns (errors, the version's schema or None)."""
    errs = []
    where = fname

    def need(cond, msg):
        if not cond:
            errs.append(f"{where}: {msg}")
        return cond

    if not need(isinstance(doc, dict), "not a mapping"):
        return errs, None
    need(doc.get("apiVersion") == "apiextensions.k8s.io/v1",
         f"apiVersion must be apiextensions.k8s.io/v1, is {doc.get('apiVersion')!r}")
    need(doc.get("kind") == "CustomResourceDefinition",
         f"kind must be CustomResourceDefinition, is {doc.get('kind')!r}")
    name = f"{expected['plural']}.{expected['group']}"
    need((doc.get("metadata") or {}).get("name") == name, f"metadata.name must be {name}")
    spec = doc.get("spec")
    if not need(isinstance(spec, dict), "no spec"):
        return errs, None
    need(spec.get("group") == expected["group"], f"spec.group must be {expected['group']}")
    need(spec.get("scope") == "Cluster", "spec.scope must be Cluster")
    names = spec.get("names") or {}
    for key, want in (("plural", expected["plural"]), ("singular", expected["singular"]),
                      ("kind", expected["kind"]), ("listKind", expected["kind"] + "List"),
                      ("categories", ["karpenter"]), ("shortNames", expected["shortNames"])):
        need(names.get(key) == want, f"spec.names.{key} must be {want!r}, is {names.get(key)!r}")
    versions = spec.get("versions")
    if not need(isinstance(versions, list) and len(versions) == 1,
                "spec.versions must hold exactly one version"):
        return errs, None
    v = versions[0]
    where = f"{fname}: spec.versions[0]"
    need(v.get("name") == expected["version"], f"name must be {expected['version']}")
    need(v.get("served") is True, "served must be true")
    need(v.get("storage") is True, "storage must be true")
    need(v.get("subresources") == {"status": {}}, "subresources must be {status: {}}")
    cols = v.get("additionalPrinterColumns")
    if need(isinstance(cols, list), "additionalPrinterColumns missing"):
        col_names = [c.get("name") for c in cols if isinstance(c, dict)]
        for want in expected["columns"]:
            need(want in col_names, f"printer column {want!r} missing")
        for c in cols:
            if not isinstance(c, dict):
                need(False, "a printer column is not a mapping")
                continue
            need(c.get("type") in PRINTER_TYPES,
                 f"printer column {c.get('name')!r}: type {c.get('type')!r}")
            need(str(c.get("jsonPath", "")).startswith("."),
                 f"printer column {c.get('name')!r}: jsonPath must start with '.'")
    schema = (v.get("schema") or {}).get("openAPIV3Schema")
    if not need(isinstance(schema, dict), "schema.openAPIV3Schema missing"):
        return errs, None
    where = f"{fname}: schema"
    structural(schema, where, errs, root=True)
    props = schema.get("properties") or {}
    for part in ("spec", "status"):
        need(isinstance(props.get(part), dict) and
             props[part].get("x-kubernetes-preserve-unknown-fields") is True,
             f"{part} must have x-kubernetes-preserve-unknown-fields: true")
    return errs, schema


# ------------------------------------------------------------------------------- validation
def type_name(value):
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            int: "integer", float: "number", type(None): "null"}.get(type(value),
                                                                      type(value).__name__)


def is_int(value):
    return (isinstance(value, int) and not isinstance(value, bool)) or \
        (isinstance(value, float) and value.is_integer())


def validate(value, schema, path, errs):
    """Appends to errs every way `value` (at `path`) breaks `schema`, including every field it
    sets that the schema does not declare."""
    if value is None:
        if not schema.get("nullable"):
            errs.append(f"{path}: null is not allowed")
        return
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: {value!r} is not one of {schema['enum']}")
    t = schema.get("type")
    if schema.get("x-kubernetes-int-or-string") is True:
        if isinstance(value, str):
            check_string(value, schema, path, errs)
        elif not is_int(value):
            errs.append(f"{path}: must be an integer or a string, is {type_name(value)} "
                        f"{value!r}")
        return
    if t == "string":
        if not isinstance(value, str):
            errs.append(f"{path}: must be a string, is {type_name(value)} {value!r}")
            return
        check_string(value, schema, path, errs)
    elif t == "integer":
        if not is_int(value):
            errs.append(f"{path}: must be an integer, is {type_name(value)} {value!r}")
            return
        check_number(value, schema, path, errs)
    elif t == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errs.append(f"{path}: must be a number, is {type_name(value)} {value!r}")
            return
        check_number(value, schema, path, errs)
    elif t == "boolean":
        if not isinstance(value, bool):
            errs.append(f"{path}: must be a boolean, is {type_name(value)} {value!r}")
    elif t == "array":
        if not isinstance(value, list):
            errs.append(f"{path}: must be a list, is {type_name(value)}")
            return
        check_array(value, schema, path, errs)
    elif t == "object" or (t is None and isinstance(value, dict)):
        if not isinstance(value, dict):
            errs.append(f"{path}: must be a mapping, is {type_name(value)} {value!r}")
            return
        check_object(value, schema, path, errs)
    elif t is None and isinstance(value, list) and "items" in schema:
        check_array(value, schema, path, errs)


def check_string(value, schema, path, errs):
    if "minLength" in schema and len(value) < schema["minLength"]:
        errs.append(f"{path}: {value!r} is shorter than {schema['minLength']}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errs.append(f"{path}: {value!r} is longer than {schema['maxLength']}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errs.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if schema.get("format") == "date-time" and not DATE_TIME.match(value):
        errs.append(f"{path}: {value!r} is not an RFC 3339 date-time")


def check_number(value, schema, path, errs):
    lo, hi = INT_RANGES.get(schema.get("format"), (None, None))
    if lo is not None and not lo <= value <= hi:
        errs.append(f"{path}: {value} is out of the {schema['format']} range")
    if "minimum" in schema and value < schema["minimum"]:
        errs.append(f"{path}: {value} is below the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errs.append(f"{path}: {value} is above the maximum {schema['maximum']}")


def check_array(value, schema, path, errs):
    if "minItems" in schema and len(value) < schema["minItems"]:
        errs.append(f"{path}: has {len(value)} items, fewer than {schema['minItems']}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errs.append(f"{path}: has {len(value)} items, more than {schema['maxItems']}")
    lt = schema.get("x-kubernetes-list-type")
    if lt == "set":
        seen = []
        for v in value:
            if v in seen:
                errs.append(f"{path}: {v!r} appears twice in a set")
            seen.append(v)
    elif lt == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen = []
        for v in value:
            if isinstance(v, dict):
                k = tuple(v.get(key) for key in keys)
                if k in seen:
                    errs.append(f"{path}: two items have the same {'/'.join(keys)} {k}")
                seen.append(k)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, v in enumerate(value):
            validate(v, items, f"{path}[{i}]", errs)


def check_object(value, schema, path, errs):
    props = schema.get("properties") or {}
    for r in schema.get("required") or []:
        if r not in value and "default" not in props.get(r, {}):
            errs.append(f"{path}.{r}: required")
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errs.append(f"{path}: has {len(value)} entries, fewer than {schema['minProperties']}")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errs.append(f"{path}: has {len(value)} entries, more than {schema['maxProperties']}")
    ap = schema.get("additionalProperties")
    open_ended = schema.get("x-kubernetes-preserve-unknown-fields") is True and not props \
        and ap is None
    for key, v in value.items():
        if not isinstance(key, str):
            errs.append(f"{path}: key {key!r} is not a string")
            continue
        sub_path = f"{path}.{key}"
        if key in props:
            validate(v, props[key], sub_path, errs)
        elif isinstance(ap, dict):
            validate(v, ap, sub_path, errs)
        elif ap is True or open_ended:
            continue
        else:
            errs.append(f"{sub_path}: not declared in the schema")


def validate_document(doc, kind_info, where, errs):
    """Validates one object of a CRD's kind; metadata is ObjectMeta, checked only for a name."""
    want_api = f"{kind_info['group']}/{kind_info['version']}"
    if doc.get("apiVersion") != want_api:
        errs.append(f"{where}: apiVersion {doc.get('apiVersion')!r} is not served "
                    f"(the CRD serves {want_api})")
        return
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name") or meta.get("generateName"),
                                                    str):
        errs.append(f"{where}: metadata.name missing")
    body = {k: v for k, v in doc.items() if k != "metadata"}
    schema = dict(kind_info["schema"])
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k != "metadata"}
    schema["required"] = [r for r in schema.get("required") or [] if r != "metadata"]
    validate(body, schema, where, errs)


# ---------------------------------------------------------------------------------- scanning
def load_crds(root, errs):
    """kind -> {group, version, schema, file} for the CRDs that check out."""
    kinds = {}
    crd_dir = root / CRD_DIR
    for fname, expected in EXPECTED.items():
        path = crd_dir / fname
        rel = path.relative_to(root)
        if not path.is_file():
            errs.append(f"{rel}: missing")
            continue
        try:
            docs = load_all(path.read_text())
        except yaml.YAMLError as e:
            errs.append(f"{rel}: does not parse: {e}")
            continue
        if len(docs) != 1:
            errs.append(f"{rel}: must hold exactly one document, holds {len(docs)}")
            continue
        crd_errs, schema = check_crd(str(rel), docs[0], expected)
        errs.extend(crd_errs)
        if schema is not None:
            kinds[expected["kind"]] = {"group": expected["group"],
                                       "version": expected["version"],
                                       "schema": schema, "file": str(rel)}
    return kinds


def check_chart_copies(root, errs):
    src, dst = root / CRD_DIR, root / CHART_CRD_DIR
    for d in (src, dst):
        if d.is_dir():
            extra = sorted(p.name for p in d.iterdir() if p.name not in EXPECTED)
            if extra:
                errs.append(f"{d.relative_to(root)}: unexpected files {extra}")
    for fname in EXPECTED:
        a, b = src / fname, dst / fname
        if not b.is_file():
            errs.append(f"{b.relative_to(root)}: missing (copy {a.relative_to(root)})")
        elif a.is_file() and a.read_bytes() != b.read_bytes():
            errs.append(f"{b.relative_to(root)}: differs from {a.relative_to(root)} "
                        "(the chart's copy must be byte-identical)")


def yaml_files(root, dirs):
    for d in dirs:
        base = root / d
        if base.is_dir():
            yield from sorted(p for p in base.rglob("*")
                              if p.is_file() and p.suffix in (".yaml", ".yml"))


KIND_LINE = re.compile(r"^\s*kind:\s*[\"']?(NodePool|NodeClaim|EC2NodeClass|NodeOverlay)\b",
                       re.M)


def objects_of(doc):
    """The objects a document holds: itself, or the items of a List."""
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        return [d for d in doc["items"] if isinstance(d, dict)]
    return [doc]


def scan(root, dirs, kinds, errs, stats):
    for path in yaml_files(root, dirs):
        rel = path.relative_to(root)
        text = path.read_text(errors="replace")
        stats["files"] += 1
        if "{{" in text:
            stats["templates"] += 1
            continue
        try:
            docs = load_all(text)
        except yaml.YAMLError as e:
            if KIND_LINE.search(text):
                errs.append(f"{rel}: does not parse: {e}")
            else:
                stats["unparsed"].append(str(rel))
            continue
        found = False
        for n, doc in enumerate(docs):
            if not isinstance(doc, dict):
                continue
            for i, obj in enumerate(objects_of(doc)):
                kind = obj.get("kind")
                if kind not in ("NodePool", "NodeClaim", "EC2NodeClass", "NodeOverlay"):
                    continue
                found = True
                name = (obj.get("metadata") or {}).get("name", "?")
                where = f"{rel} (document {n + 1}{f', item {i + 1}' if obj is not doc else ''}" \
                        f", {kind} {name})"
                if kind not in kinds:
                    errs.append(f"{where}: no usable CRD for {kind}")
                    continue
                validate_document(obj, kinds[kind], where, errs)
                stats["kinds"][kind] = stats["kinds"].get(kind, 0) + 1
                stats["documents"] += 1
        if found:
            stats["with_objects"] += 1


def new_stats():
    return {"files": 0, "templates": 0, "with_objects": 0, "documents": 0, "kinds": {},
            "unparsed": []}


def run(root):
    crd_errs, copy_errs, errs = [], [], []
    kinds = load_crds(root, crd_errs)
    check_chart_copies(root, copy_errs)
    stats = new_stats()
    scan(root, SCAN_DIRS, kinds, errs, stats)
    warns = []
    wstats = new_stats()
    scan(root, WARN_DIRS, kinds, warns, wstats)
    for w in warns:
        print(f"warning (tests/ fixture): {w}")
    errs = crd_errs + copy_errs + errs
    for e in errs:
        print(f"error: {e}")
    by_kind = ", ".join(f"{stats['kinds'].get(k, 0)} {k}"
                        for k in ("NodePool", "NodeClaim", "EC2NodeClass", "NodeOverlay"))
    crds = "well-formed and structural" if not crd_errs else "WITH ERRORS"
    copies = "identical" if not copy_errs else "NOT identical"
    summary = (f"{len(EXPECTED)} CRDs {crds}, chart copies {copies}; "
               f"{stats['documents']} documents validated ({by_kind}) from "
               f"{stats['with_objects']} of {stats['files']} YAML files under "
               f"{', '.join(d + '/' for d in SCAN_DIRS)} ({stats['templates']} Helm templates "
               f"skipped); tests/: {wstats['documents']} documents, {len(warns)} warnings")
    if errs:
        print(f"check_crds: FAILED with {len(errs)} errors: {summary}")
        return 1
    print(f"check_crds: OK: {summary}")
    return 0


# --------------------------------------------------------------------------------- self-test
GOOD = {
    "NodePool": """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: good}
spec:
  weight: 50
  template:
    metadata: {labels: {team: a}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot], minValues: 1}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gte, values: ["5"]}
      taints: [{key: a, value: b, effect: NoSchedule}]
      expireAfter: Never
      terminationGracePeriod: 48h
  limits: {cpu: "1000", memory: 1000Gi, nodes: 10}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 1h30m
    budgets:
      - nodes: "10%"
      - {nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h, reasons: [Drifted, Empty]}
status:
  nodes: 3
  resources: {cpu: 1930m, nodes: "3"}
  conditions:
    - {type: Ready, status: "True", reason: Ready, lastTransitionTime: "2026-01-02T03:04:05Z"}
""",
    "NodeClaim": """
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: good-abcde}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
  resources: {requests: {cpu: 250m, pods: 3}}
  expireAfter: 720h
status:
  nodeName: ip-10-0-0-1
  providerID: aws:///us-east-1a/i-0123
  capacity: {cpu: "2", memory: 8Gi}
  lastPodEventTime: "2026-01-02T03:04:05.123Z"
""",
    "EC2NodeClass": """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: good}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@v20240807}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}, {id: subnet-0abc}]
  securityGroupSelectorTerms: [{name: sg-name}]
  capacityReservationSelectorTerms: [{id: cr-56fac701cc1951b03}, {ownerID: "123456789012"}]
  metadataOptions: {httpTokens: required, httpPutResponseHopLimit: 2}
  blockDeviceMappings:
    - {deviceName: /dev/xvda, rootVolume: true,
       ebs: {volumeSize: 100Gi, volumeType: gp3, encrypted: true, iops: 3000}}
  kubelet: {maxPods: 110, kubeReserved: {cpu: 100m}, evictionHard: {memory.available: 5%}}
  enclaveOptions: {enabled: true}
status:
  subnets: [{id: subnet-0abc, zone: us-east-1a}]
""",
    "NodeOverlay": """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: good}
spec:
  requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["2"]}]
  priceAdjustment: "-15%"
  capacity: {hugepages-1Gi: 4Gi}
  weight: 10
""",
}


def _set(path, value):
    def f(doc):
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return f


def _del(path):
    def f(doc):
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        del node[last]
    return f


# (what, kind, mutation, text an error must contain)
BAD = [
    ("NodePool weight 0", "NodePool", _set("spec.weight", 0), "spec.weight"),
    ("NodePool weight 101", "NodePool", _set("spec.weight", 101), "spec.weight"),
    ("NodePool weight as a string", "NodePool", _set("spec.weight", "10"), "spec.weight"),
    ("requirement operator Maybe", "NodePool",
     _set("spec.template.spec.requirements.0.operator", "Maybe"), "operator"),
    ("undeclared field in the template spec", "NodePool",
     _set("spec.template.spec.colour", "blue"), "spec.template.spec.colour"),
    ("undeclared field at the root of spec", "NodePool", _set("spec.frobnicate", True),
     "spec.frobnicate"),
    ("undeclared field in status", "NodePool", _set("status.bogus", 1), "status.bogus"),
    ("consolidationPolicy Sometimes", "NodePool",
     _set("spec.disruption.consolidationPolicy", "Sometimes"), "consolidationPolicy"),
    ("expireAfter 30d", "NodePool", _set("spec.template.spec.expireAfter", "30d"), "expireAfter"),
    ("budget nodes 110%", "NodePool", _set("spec.disruption.budgets.0.nodes", "110%"), "nodes"),
    ("budget reason Expired", "NodePool",
     _set("spec.disruption.budgets.1.reasons", ["Expired"]), "reasons"),
    ("budget reason twice", "NodePool",
     _set("spec.disruption.budgets.1.reasons", ["Empty", "Empty"]), "reasons"),
    ("minValues 0", "NodePool", _set("spec.template.spec.requirements.0.minValues", 0),
     "minValues"),
    ("no nodeClassRef", "NodePool", _del("spec.template.spec.nodeClassRef"), "nodeClassRef"),
    ("taint effect Sometimes", "NodePool",
     _set("spec.template.spec.taints.0.effect", "Sometimes"), "effect"),
    ("limit 1.5 (a float, not a quantity string)", "NodePool", _set("spec.limits.cpu", 1.5),
     "limits.cpu"),
    ("condition status Yes", "NodePool", _set("status.conditions.0.status", "Yes"), "status"),
    ("two Ready conditions", "NodePool",
     _set("status.conditions", [{"type": "Ready", "status": "True"},
                                {"type": "Ready", "status": "False"}]), "conditions"),
    ("old apiVersion", "NodePool", _set("apiVersion", "karpenter.sh/v1beta1"), "apiVersion"),
    ("NodeClaim without requirements", "NodeClaim", _del("spec.requirements"), "requirements"),
    ("NodeClaim lastPodEventTime not a time", "NodeClaim",
     _set("status.lastPodEventTime", "yesterday"), "lastPodEventTime"),
    ("EC2NodeClass alias ubuntu@latest", "EC2NodeClass",
     _set("spec.amiSelectorTerms.0.alias", "ubuntu@latest"), "alias"),
    ("EC2NodeClass pinned windows alias", "EC2NodeClass",
     _set("spec.amiSelectorTerms.0.alias", "windows2022@v1"), "alias"),
    ("EC2NodeClass httpTokens maybe", "EC2NodeClass",
     _set("spec.metadataOptions.httpTokens", "maybe"), "httpTokens"),
    ("EC2NodeClass hop limit 65", "EC2NodeClass",
     _set("spec.metadataOptions.httpPutResponseHopLimit", 65), "httpPutResponseHopLimit"),
    ("EC2NodeClass no subnetSelectorTerms", "EC2NodeClass", _del("spec.subnetSelectorTerms"),
     "subnetSelectorTerms"),
    ("EC2NodeClass empty amiSelectorTerms", "EC2NodeClass", _set("spec.amiSelectorTerms", []),
     "amiSelectorTerms"),
    ("EC2NodeClass volumeType gp9", "EC2NodeClass",
     _set("spec.blockDeviceMappings.0.ebs.volumeType", "gp9"), "volumeType"),
    ("EC2NodeClass undeclared kubelet field", "EC2NodeClass",
     _set("spec.kubelet.notAKubeletField", 1), "kubelet.notAKubeletField"),
    ("EC2NodeClass enclaveOptions without enabled", "EC2NodeClass",
     _set("spec.enclaveOptions", {}), "enabled"),
    ("EC2NodeClass capacity reservation id", "EC2NodeClass",
     _set("spec.capacityReservationSelectorTerms.0.id", "odcr-1"), "id"),
    ("NodeOverlay weight 0", "NodeOverlay", _set("spec.weight", 0), "spec.weight"),
    ("NodeOverlay priceAdjustment 10%", "NodeOverlay", _set("spec.priceAdjustment", "10%"),
     "priceAdjustment"),
    ("NodeOverlay price -1", "NodeOverlay", _set("spec.price", "-1"), "price"),
]


def _schema_at(schema, path):
    node = schema
    for p in path.split("."):
        node = node["items"] if p == "[]" else node["properties"][p]
    return node


# (what, mutation of a copy of the NodePool CRD's schema, text an error must contain)
BAD_SCHEMAS = [
    ("a property without a type", lambda s: _schema_at(s, "spec.weight").pop("type"),
     "spec.weight: no type"),
    ("metadata restricting labels",
     lambda s: s["properties"]["metadata"].update(
         {"properties": {"labels": {"type": "object"}}}), "metadata.labels"),
    ("a type inside anyOf",
     lambda s: _schema_at(s, "spec.weight").update({"anyOf": [{"type": "integer"}]}),
     "inside allOf/anyOf/oneOf/not"),
    ("an array without items",
     lambda s: _schema_at(s, "spec.template.spec.taints").pop("items"), "items"),
    ("a misspelt keyword", lambda s: _schema_at(s, "spec.weight").update({"minimun": 1}),
     "minimun"),
    ("a default that does not validate",
     lambda s: _schema_at(s, "spec.disruption.consolidationPolicy").update({"default": "Never"}),
     "default"),
    ("a look-ahead pattern",
     lambda s: _schema_at(s, "spec.template.spec.expireAfter").update({"pattern": "^(?=x)"}),
     "RE2"),
]


def self_test(root):
    errs = []
    kinds = load_crds(root, errs)
    if errs or len(kinds) != len(EXPECTED):
        for e in errs:
            print(f"error: {e}")
        print("check_crds --self-test: FAILED: the CRDs themselves do not check out")
        return 1
    failures = 0
    for kind, text in GOOD.items():
        problems = []
        validate_document(load_all(text)[0], kinds[kind], f"good {kind}", problems)
        if problems:
            failures += 1
            print(f"FAIL: a valid {kind} was refused: {problems}")
    for what, kind, mutate, expect in BAD:
        doc = copy.deepcopy(load_all(GOOD[kind])[0])
        mutate(doc)
        problems = []
        validate_document(doc, kinds[kind], f"bad {kind}", problems)
        if not any(expect in p for p in problems):
            failures += 1
            print(f"FAIL: {what}: accepted (or refused without naming {expect!r}): {problems}")
        else:
            print(f"ok: {what}: refused: {next(p for p in problems if expect in p)}")
    for what, mutate, expect in BAD_SCHEMAS:
        schema = copy.deepcopy(kinds["NodePool"]["schema"])
        mutate(schema)
        problems = []
        structural(schema, "schema", problems, root=True)
        if not any(expect in p for p in problems):
            failures += 1
            print(f"FAIL: schema with {what}: accepted (or refused without naming "
                  f"{expect!r}): {problems}")
        else:
            print(f"ok: schema with {what}: refused: {next(p for p in problems if expect in p)}")
    total = len(GOOD) + len(BAD) + len(BAD_SCHEMAS)
    if failures:
        print(f"check_crds --self-test: FAILED: {failures} of {total} cases")
        return 1
    print(f"check_crds --self-test: OK: {len(GOOD)} valid objects accepted, {len(BAD)} bad "
          f"objects and {len(BAD_SCHEMAS)} bad schemas refused")
    return 0


def check_objects(root, files):
    errs = []
    kinds = load_crds(root, errs)
    documents = 0
    for f in files:
        for i, doc in enumerate(load_all(Path(f).read_text()), start=1):
            for obj in objects_of(doc) if isinstance(doc, dict) else []:
                kind = obj.get("kind") if isinstance(obj, dict) else None
                if kind not in kinds:
                    continue
                name = (obj.get("metadata") or {}).get("name", "<unnamed>")
                validate_document(obj, kinds[kind], f"{f} (document {i}, {kind} {name})", errs)
                documents += 1
    for e in errs:
        print(f"error: {e}")
    if errs:
        print(f"check_crds --objects: FAILED with {len(errs)} errors in {documents} objects")
        return 1
    print(f"check_crds --objects: OK: {documents} objects validated")
    return 0


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    flags = [a for a in argv if a.startswith("--")]
    if "--objects" in flags and flags == ["--objects"]:
        return check_objects(Path(__file__).resolve().parent.parent, args)
    unknown = [f for f in flags if f not in ("--self-test", "--help")]
    if unknown or len(args) > 1 or "--help" in flags:
        print(__doc__)
        return 0 if "--help" in flags and not unknown else 2
    root = Path(args[0]).resolve() if args else Path(__file__).resolve().parent.parent
    if "--self-test" in flags:
        return self_test(root)
    return run(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
