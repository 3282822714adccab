#!/usr/bin/env python3
"""Kubernetes API test peer for dovetail's `kube` crate.

A Kubernetes API server for integration tests: kmock (PyPI ``kmock``, pinned in
``requirements.txt``, an independent Kubernetes API emulator on aiohttp) behind
a thin subclass that adds what a kube-rs controller depends on. It serves plain
HTTP on 127.0.0.1 only, JSON only, no authentication.

What kmock provides (used as is):

* the HTTP server side: kmock's handler is the aiohttp request handler, and
  kmock parses every request into verb, resource (group/version/plural),
  namespace, name, subresource, query parameters and body;
* the object store: ``KubernetesEmulator.objects`` keeps every object with its
  version history (trimmed here to the last 16 versions) and soft deletion,
  and is the only copy of the state;
* GET of one object (``_serve_fetch``) and the base of LIST
  (``_serve_list``: the objects of one resource, in one or all namespaces);
* the patch algorithms: JSON merge patch and JSON patch (RFC 6902) from
  kmock's ``patch_dict``;
* per-resource event buses (``aiobus.Bus``) that fan each change out to every
  open watch;
* the resource registry (``resources``, ``ResourceInfo``) and the routing of
  the discovery paths (``/``, ``/api``, ``/api/v1``, ``/apis``,
  ``/apis/{group}``, ``/apis/{group}/{version}``, ``/version``) to handlers.

What this wrapper adds:

* metadata kmock does not stamp: ``resourceVersion`` (one global counter,
  bumped on every write), ``uid``, ``creationTimestamp`` (RFC 3339, ``Z``),
  ``generation`` (1 at create, +1 when ``spec`` changes); lists carry
  ``kind: XList``, ``apiVersion`` and the list's ``resourceVersion``; items
  are sorted by namespace and name; ``generateName``;
* ``labelSelector`` (``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``,
  ``!key``) and ``fieldSelector`` (``metadata.name``, ``metadata.namespace``
  and, per kind, the fields the apiserver supports, e.g. pods'
  ``spec.nodeName`` and ``status.phase``; ``=``, ``==``, ``!=``) on list,
  watch and deletecollection;
* watch as kube-apiserver does it (kmock's watch streams everything from
  "now" and knows no resource versions): replay after ``resourceVersion``
  from a kept history, synthetic ADDED events when it is absent or "0" (and
  with ``sendInitialEvents=true``, closed by the ``k8s.io/initial-events-end``
  bookmark), ``410 Expired`` ERROR events for versions older than the
  history (the last 10000 events), BOOKMARK events with
  ``allowWatchBookmarks=true`` (after ``--bookmark-interval`` seconds idle,
  default 10, and before a timeout), ``timeoutSeconds``, ADDED/DELETED when an object moves
  into or out of a selector, and named watches;
* writes (kmock applies writes before any hook can see them, so the wrapper
  does create/update/patch/delete itself and stores the result in kmock's
  store): PUT (kmock has none), optimistic concurrency (409 ``Conflict`` for a
  stale ``resourceVersion`` in a PUT body, in a patched result and in
  DELETE preconditions), 409 ``AlreadyExists``, 404 ``NotFound``; patch
  content types merge, strategic merge (as merge) and apply (as merge; JSON
  bodies only; creates a missing object), JSON patch; no-op writes change
  nothing and emit nothing, like the apiserver;
* the ``status`` subresource (GET/PUT/PATCH change only ``.status``; writes to
  the main resource keep the stored ``.status``) for every kind;
* finalizers: DELETE of an object with finalizers sets ``deletionTimestamp``
  (MODIFIED); the write that empties its finalizers removes it (DELETED);
* ``pods/eviction`` checked against ``policy/v1`` PodDisruptionBudgets, and
  PDB ``status`` (currentHealthy, desiredHealthy, disruptionsAllowed,
  expectedPods, observedGeneration) recomputed after every pod or PDB write;
* deletecollection; ``Status`` bodies with the apiserver's reasons and
  messages for every error (bad JSON is 400 ``BadRequest``, never a crash);
* discovery documents fixed for kube-rs and kubectl (kmock's say
  ``groupVersion: "/v1"``, pick a random preferred version, give subresources
  their parent's kind and verbs), the aggregated discovery document
  (``apidiscovery.k8s.io/v2``) when the Accept header asks for it, and
  ``/version`` v1.33.0;
* a fix for kmock's path parser, which fails on ``/api/v1/namespaces`` and
  reads ``/api/v1/namespaces/{name}`` as a namespace, not a Namespace object;
* the control endpoints and the request log below.

Eviction follows kube-apiserver: pods that are Pending, Succeeded, Failed or
already terminating are evicted without a budget check; more than one
matching PDB is a 500 (the apiserver does not support it); a not-ready pod is
evicted when the budget is healthy (currentHealthy >= desiredHealthy > 0) or
``unhealthyPodEvictionPolicy`` is AlwaysAllow; otherwise a PDB with no
disruption left answers 429 ``TooManyRequests`` ("Cannot evict pod as it would
violate the pod's disruption budget." followed by the PDB's name and numbers,
also in ``details.causes``). Healthy = phase Running, condition Ready True,
not terminating (a pod without status is not healthy). Expected pods = the
matching pods; disruptions allowed = healthy - minAvailable, or
maxUnavailable - unhealthy (percentages of the expected pods, rounded up).
Success deletes the pod (finalizers apply) and answers 201 ``Status`` Success.

Not emulated: authentication/RBAC, admission and validation beyond basic
shapes, field managers and strategic-merge list semantics (lists are replaced
whole), graceful pod deletion (``gracePeriodSeconds`` and
``propagationPolicy`` are ignored; deletion is immediate unless finalizers
hold it), garbage collection, namespace cascades, ``limit``/``continue``
paging (every list is one page), resourceVersion on GET/LIST (always the
latest state), YAML bodies, protobuf, dry run, bodies over 1 MiB (aiohttp's
limit answers 413). Create keeps a posted
``.status`` (the apiserver resets it for most kinds) so tests can seed state
in one call.

Control endpoints (JSON over HTTP on the same port, never logged):

  POST /_peer/reset           removes every object; the resourceVersion
                              counter keeps increasing; the watch history is
                              forgotten and open watches are closed (clients
                              re-list, and old versions get 410).
  POST /_peer/compact         forgets the watch history: a watch from any
                              older resourceVersion gets 410 Expired.
  POST /_peer/drop-watches    closes every open watch stream (a disconnect).
  GET  /_peer/requests        every resource request so far, in arrival order:
                              [{"verb": "list|watch|get|create|update|patch|
                              delete|deletecollection", "group": "", "version":
                              "v1", "resource": "pods", "subresource":
                              "eviction"|null, "namespace": ns|null, "name":
                              name-in-URL|null, "code": 200, "user_agent":
                              "dovetail/0.1.0"|null}]; verbs are RBAC
                              verbs; discovery and /version (non-resource URLs)
                              are not listed; a watch's code is set when its
                              stream starts.
  POST /_peer/requests/clear  empties that log.

Process contract (as the AWS peer's): prints exactly one line ``PORT <n>`` to
stdout once listening on 127.0.0.1 (``--port 0``, the default, picks a free
port), logs only to stderr, and exits as soon as stdin reaches EOF unless
``--keep-running``.
"""

import argparse
import asyncio
import contextlib
import copy
import dataclasses
import datetime
import json
import math
import os
import random
import re
import sys
import threading
import traceback
import uuid
from collections import deque

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import kmock
from kmock._internal import dicts as kmock_dicts
from kmock._internal import parsing as kmock_parsing

SERVER_VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0",
    "gitCommit": "60a317eadfcb839692a5d5d9e8a8d5a4c3d2e6a1",
    "gitTreeState": "clean",
    "buildDate": "2025-04-23T13:00:00Z",
    "goVersion": "go1.24.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}

OBJECT_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
STATUS_VERBS = ["get", "patch", "update"]

# Metadata the server owns: a client's update or patch cannot change these.
SERVER_OWNED_METADATA = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
)

MERGE_PATCH_TYPES = {
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",  # treated as a merge patch
    "application/apply-patch+yaml",  # server-side apply, treated as a merge patch
}
JSON_PATCH_TYPE = "application/json-patch+json"
APPLY_PATCH_TYPE = "application/apply-patch+yaml"

# Watch events kept for resuming watches; older resource versions get 410.
HISTORY_LIMIT = 10000
# A watch without timeoutSeconds ends after this long, like the apiserver's default range.
DEFAULT_WATCH_TIMEOUT = 1800.0
# kmock keeps every request and every object version; long tests only need recent ones.
KEPT_KMOCK_REQUESTS = 1000
KEPT_OBJECT_VERSIONS = 16

_DROP = object()  # put on the event buses to end every open watch


def log(msg):
    sys.stderr.write(f"kube_peer: {msg}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- kinds


@dataclasses.dataclass(frozen=True)
class Kind:
    """One served resource; the table below is what the peer knows."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple = ()
    subresources: tuple = ()  # "status", "eviction"
    categories: tuple = ()
    # Field selectors the apiserver accepts for this kind, beyond metadata.name/namespace.
    fields: tuple = ()

    @property
    def api_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self):
        return self.kind.lower()

    @property
    def key(self):
        """The resource as kmock keys its objects and buses."""
        return kmock.resource(group=self.group, version=self.version, plural=self.plural)


POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
EVENTS_V1_FIELDS = (
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "reason",
    "type",
)

KINDS = (
    Kind("", "v1", "pods", "Pod", True, ("po",), ("status", "eviction"), ("all",), POD_FIELDS),
    Kind("", "v1", "nodes", "Node", False, ("no",), ("status",), (), ("spec.unschedulable",)),
    Kind("", "v1", "namespaces", "Namespace", False, ("ns",), ("status",), (), ("status.phase",)),
    Kind("", "v1", "events", "Event", True, ("ev",), (), (), EVENT_FIELDS),
    Kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), ("status",)),
    Kind("", "v1", "persistentvolumes", "PersistentVolume", False, ("pv",), ("status",)),
    Kind("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",), ("all",)),
    Kind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), ("status",)),
    Kind("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",)),
    Kind("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    Kind("coordination.k8s.io", "v1", "leases", "Lease", True),
    Kind("events.k8s.io", "v1", "events", "Event", True, ("ev",), (), (), EVENTS_V1_FIELDS),
    Kind("karpenter.sh", "v1", "nodepools", "NodePool", False, (), ("status",), ("karpenter",)),
    Kind("karpenter.sh", "v1", "nodeclaims", "NodeClaim", False, (), ("status",), ("karpenter",)),
    Kind(
        "karpenter.k8s.aws",
        "v1",
        "ec2nodeclasses",
        "EC2NodeClass",
        False,
        ("ec2nc", "ec2ncs"),
        ("status",),
        ("karpenter",),
    ),
    Kind("karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay", False, (), ("status",), ("karpenter",)),
)
KINDS_BY_PATH = {(k.group, k.version, k.plural): k for k in KINDS}
PODS = KINDS_BY_PATH[("", "v1", "pods")]
PDBS = KINDS_BY_PATH[("policy", "v1", "poddisruptionbudgets")]


def version_priority(version):
    """Kubernetes' version order: GA before beta before alpha, then by number (descending)."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (stage, int(m.group(1)), int(m.group(3) or 0))


def group_versions(group):
    """Versions served for a group, the preferred first."""
    versions = {k.version for k in KINDS if k.group == group}
    return sorted(versions, key=version_priority, reverse=True)


# --------------------------------------------------------------------------- kmock path fix

_kmock_parse_path = kmock_parsing.parse_path


def _parse_path(path):
    """kmock's parser with the core `namespaces` resource fixed.

    kmock 0.8 treats `namespaces/X` as a namespace prefix everywhere, so
    `/api/v1/namespaces` raises and `/api/v1/namespaces/X` has no resource.
    """
    parts = path.strip("/").split("/")
    if parts[:3] == ["api", "v1", "namespaces"] and (
        len(parts) <= 4 or (len(parts) == 5 and parts[4] in ("status", "finalize"))
    ):
        return kmock_parsing.ParsedPath(
            group="",
            version="v1",
            plural="namespaces",
            namespace=None,
            name=parts[3] if len(parts) > 3 else None,
            subresource=parts[4] if len(parts) > 4 else None,
        )
    return _kmock_parse_path(path)


kmock_parsing.parse_path = _parse_path


# --------------------------------------------------------------------------- errors


def api_error(code, reason, message, **details):
    """A failure that is answered as a Kubernetes `Status` object."""
    return kmock.KubernetesError(status=code, reason=reason, message=message, details=details or None)


def status_body(code, reason, message, details=None):
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def bad_request(message):
    return api_error(400, "BadRequest", message)


def invalid(kind, name, message):
    return api_error(
        422,
        "Invalid",
        f'{kind.kind} "{name}" is invalid: {message}',
        name=name,
        group=kind.group,
        kind=kind.kind,
    )


def not_found(kind, name):
    return api_error(
        404, "NotFound", f'{kind.plural} "{name}" not found', name=name, group=kind.group, kind=kind.plural
    )


def no_such_resource():
    return api_error(404, "NotFound", "the server could not find the requested resource")


def method_not_allowed(verb, kind, subresource):
    what = f"{kind.plural}/{subresource}" if subresource else kind.plural
    return api_error(405, "MethodNotAllowed", f"{verb} is not supported on {what}")


def conflict(kind, name):
    return api_error(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {kind.plural} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        name=name,
        group=kind.group,
        kind=kind.plural,
    )


def already_exists(kind, name):
    return api_error(
        409,
        "AlreadyExists",
        f'{kind.plural} "{name}" already exists',
        name=name,
        group=kind.group,
        kind=kind.plural,
    )


def json_response(body, code=200):
    return aiohttp.web.json_response(body, status=code)


def header(request, name):
    """A request header, case-insensitively (hyper, under kube-rs, sends lower-case names;
    kmock's `Request.headers` is a plain dict)."""
    raw = request._raw_request
    if raw is not None:
        return raw.headers.get(name)
    return next((v for k, v in request.headers.items() if k.lower() == name.lower()), None)


# --------------------------------------------------------------------------- selectors

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_TERM = re.compile(rf"({_KEY})\s+(in|notin)\s*\(([^()]*)\)")
_EQ_TERM = re.compile(rf"({_KEY})\s*(==|=|!=)\s*({_VALUE})")
_EXISTS_TERM = re.compile(rf"(!?)\s*({_KEY})")


def _split_terms(text):
    """Split a selector on the commas that are not inside `( )`."""
    terms, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def parse_label_selector(text):
    """`labelSelector` → a predicate on a labels dict; 400 when malformed."""
    requirements = []
    for term in _split_terms(text or ""):
        if m := _SET_TERM.fullmatch(term):
            values = {v.strip() for v in m.group(3).split(",") if v.strip()}
            requirements.append((m.group(2), m.group(1), values))
        elif m := _EQ_TERM.fullmatch(term):
            op = "!=" if m.group(2) == "!=" else "="
            requirements.append((op, m.group(1), m.group(3)))
        elif m := _EXISTS_TERM.fullmatch(term):
            requirements.append(("!exists" if m.group(1) else "exists", m.group(2), None))
        else:
            raise bad_request(f"unable to parse requirement: {term!r} in labelSelector {text!r}")

    def matches(labels):
        labels = labels if isinstance(labels, dict) else {}
        for op, key, value in requirements:
            present, actual = key in labels, labels.get(key)
            ok = {
                "=": present and actual == value,
                "!=": not present or actual != value,
                "in": present and actual in (value or ()),
                "notin": not present or actual not in (value or ()),
                "exists": present,
                "!exists": not present,
            }[op]
            if not ok:
                return False
        return True

    return matches


def _field_value(obj, path):
    """A field as the apiserver's field selectors see it: missing is "", booleans lower-case."""
    if path == "source":  # core Event: the reporting component
        path = "source.component"
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(text, kind):
    """`fieldSelector` → a predicate on an object; 400 for bad syntax or unsupported fields."""
    supported = ("metadata.name", "metadata.namespace") + kind.fields
    requirements = []
    for term in _split_terms(text or ""):
        m = re.fullmatch(r"([A-Za-z.]+)\s*(==|=|!=)\s*(.*)", term)
        if not m:
            raise bad_request(f"invalid selector: {term!r} in fieldSelector {text!r}")
        field, op, value = m.group(1), m.group(2), m.group(3).strip()
        if field not in supported:
            raise bad_request(f'field label not supported: "{field}" for {kind.plural}')
        requirements.append((field, op != "!=", value))

    def matches(obj):
        return all((_field_value(obj, f) == v) == equal for f, equal, v in requirements)

    return matches


def _as_dict(value):
    """Objects come from clients: a field that should be an object may be anything."""
    return value if isinstance(value, dict) else {}


def label_selector_object_matches(selector, labels):
    """A `LabelSelector` object (matchLabels + matchExpressions); None selects nothing, and so
    does a malformed one (as in the apiserver's eviction code)."""
    if not isinstance(selector, dict):
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        return False
    labels = _as_dict(labels)
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for expr in expressions:
        if not isinstance(expr, dict) or not isinstance(expr.get("values") or [], list):
            return False
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = isinstance(key, str) and key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(op, False)
        if not ok:
            return False
    return True


# --------------------------------------------------------------------------- PDB arithmetic


def _meta(obj):
    return _as_dict(_as_dict(obj).get("metadata"))


def pod_is_ready(pod):
    conditions = _as_dict(pod.get("status")).get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def pod_is_healthy(pod):
    """What the disruption controller counts as healthy; a pod without status is not."""
    return (
        _as_dict(pod.get("status")).get("phase") == "Running"
        and pod_is_ready(pod)
        and not _meta(pod).get("deletionTimestamp")
    )


def pod_ignores_pdb(pod):
    """The apiserver evicts these without looking at any budget."""
    phase = _as_dict(pod.get("status")).get("phase")
    return phase in ("Pending", "Succeeded", "Failed") or bool(_meta(pod).get("deletionTimestamp"))


def _scaled(value, total):
    """An IntOrString: an int, or "N%" of total rounded up (as the disruption controller does)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("%") and text[:-1].strip().isdigit():
            return math.ceil(int(text[:-1]) * total / 100)
        if text.isdigit():
            return int(text)
    return 0


def pdb_budget(pdb, pods):
    """The numbers of a PDB over the pods of its namespace."""
    spec = _as_dict(pdb.get("spec"))
    matching = [
        p for p in pods if label_selector_object_matches(spec.get("selector"), _meta(p).get("labels"))
    ]
    expected = len(matching)
    healthy = sum(1 for p in matching if pod_is_healthy(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = 0
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": max(0, healthy - desired),
        "expectedPods": expected,
        "matching": matching,
    }


# --------------------------------------------------------------------------- the peer


@dataclasses.dataclass
class Event:
    """One write, as kept in the history and sent on kmock's bus of its resource."""

    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict
    prev: dict | None  # the state before (MODIFIED), for selector transitions


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _random_suffix():
    return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


@attrs.define(kw_only=True)
class KubePeer(kmock.KubernetesEmulator):
    bookmark_interval: float = 10.0

    _rv: int = attrs.field(default=1, init=False)
    # The history holds every event with rv > _floor; watches from older versions get 410.
    _floor: int = attrs.field(default=1, init=False)
    _history: deque = attrs.field(factory=deque, init=False)
    _request_log: list = attrs.field(factory=list, init=False)
    _open_watches: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        for kind in KINDS:
            self.resources[kind.key] = kmock.ResourceInfo(
                kind=kind.kind,
                singular=kind.singular,
                namespaced=kind.namespaced,
                verbs=OBJECT_VERBS,
                shortnames=kind.short_names,
                categories=kind.categories,
                subresources=kind.subresources,
            )

    # ------------------------------------------------------------ entry point

    async def _handle(self, request):
        """Every request: control, resources (logged), or kmock's routing (discovery)."""
        if len(self._requests) > KEPT_KMOCK_REQUESTS:
            del self._requests[:-KEPT_KMOCK_REQUESTS]  # kmock's log, only read by kmock's DSL views
        path = request.url.path
        if path.startswith("/_peer/"):
            return await self._control(request, path[len("/_peer/") :])
        if not self._is_resource_request(request):
            if path in ("/api", "/apis") and (version := self._aggregated_version(request)):
                return self._aggregated_discovery(path == "/api", version)
            return await self._respond(request, self._kmock_route(request))
        entry = self._log_request(request)
        response = await self._respond(request, self._serve_resource(request, entry))
        if entry["code"] is None:
            entry["code"] = response.status
        return response

    async def _respond(self, request, work):
        """Awaits a handler and turns any failure into a `Status` answer."""
        try:
            return await work
        except kmock.KubernetesError as e:
            return self._status_response(e, request)
        except Exception as e:  # never let a request take the server down
            log(f"{request.method.value} {request.url.path} failed:\n{traceback.format_exc()}")
            return json_response(status_body(500, "InternalError", f"internal error: {e!r}"), 500)

    async def _render_error(self, exc):
        """kmock calls this for failures before `_handle` (e.g. a body that is not UTF-8)."""
        if isinstance(exc, kmock.KubernetesError):
            return self._status_response(exc, None)
        if isinstance(exc, (ValueError, RecursionError)):  # kmock decodes the body: bad UTF-8, deep JSON
            return json_response(status_body(400, "BadRequest", f"bad request: {exc!r}"), 400)
        log(f"request failed before routing:\n{traceback.format_exc()}")
        return json_response(status_body(500, "InternalError", f"internal error: {exc!r}"), 500)

    def _status_response(self, exc, request):
        # kmock's own errors carry its own reasons ("Object Not Found", ...); use the apiserver's.
        if isinstance(exc, kmock.KubernetesObjectNotFoundError) and request is not None:
            kind = self._kind_of(request)
            if kind is not None:
                exc = not_found(kind, request.name)
        if isinstance(exc, kmock.KubernetesNotFoundError) and exc.reason != "NotFound":
            exc = no_such_resource()
        details = exc.details if isinstance(exc.details, dict) else None
        body = status_body(exc.status, exc.reason or "InternalError", exc.message or "", details)
        return json_response(body, exc.status)

    def _kmock_route(self, request):
        """kmock's own routing (its DSL reactions and fallbacks), skipping its write handling."""
        return super(kmock.KubernetesEmulator, self)._handle(request)

    # ------------------------------------------------------------ request classification

    @staticmethod
    def _is_resource_request(request):
        res = request.resource
        return res is not None and res.version is not None and res.plural is not None

    @staticmethod
    def _kind_of(request):
        res = request.resource
        if res is None:
            return None
        return KINDS_BY_PATH.get((res.group, res.version, res.plural))

    @staticmethod
    def _rbac_verb(request):
        method = request.method.value.upper()
        named = request.name is not None
        if method == "GET":
            if request.params.get("watch") in ("true", "1"):
                return "watch"
            return "get" if named else "list"
        return {
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection",
        }.get(method, method.lower())

    def _log_request(self, request):
        res = request.resource
        entry = {
            "verb": self._rbac_verb(request),
            "group": res.group,
            "version": res.version,
            "resource": res.plural,
            "subresource": request.subresource,
            "namespace": request.namespace,
            "name": request.name,
            "code": None,
            "user_agent": next(
                (v for k, v in (request.headers or {}).items() if k.lower() == "user-agent"), None
            ),
        }
        self._request_log.append(entry)
        return entry

    # ------------------------------------------------------------ resource dispatch

    async def _serve_resource(self, request, entry):
        kind = self._kind_of(request)
        if kind is None or (not kind.namespaced and request.namespace is not None):
            raise no_such_resource()
        verb, sub = entry["verb"], request.subresource
        named = request.name is not None
        if sub is not None and (sub not in kind.subresources or not named):
            raise no_such_resource()
        if named and kind.namespaced and request.namespace is None:
            raise no_such_resource()

        if sub == "eviction":
            if verb != "create":
                raise method_not_allowed(verb, kind, sub)
            return await self._evict(request)
        if sub == "status" and verb not in STATUS_VERBS:
            raise method_not_allowed(verb, kind, sub)
        if verb == "watch":
            return await self._watch(request, kind, entry)
        if verb in ("get", "list"):
            return await self._kmock_route(request)  # → kmock's _serve_fetch / our _serve_list
        if verb == "create":
            if named:
                raise method_not_allowed(verb, kind, sub)
            if kind.namespaced and request.namespace is None:
                raise no_such_resource()
            return await self._create(request, kind)
        if verb in ("update", "patch") and not named:
            raise method_not_allowed(verb, kind, sub)
        if verb == "update":
            return await self._replace(request, kind)
        if verb == "patch":
            return await self._patch(request, kind)
        if verb == "delete":
            return await self._delete(request, kind)
        if verb == "deletecollection":
            return await self._delete_collection(request, kind)
        raise method_not_allowed(verb, kind, sub)

    # ------------------------------------------------------------ store helpers (call under _lock)

    def _current(self, key):
        """A private copy of the live object, or None."""
        if key not in self.objects:
            return None
        obj = self.objects[key]
        return None if obj.deleted else copy.deepcopy(obj.raw)

    def _live_objects(self, kind, namespace=None):
        """Private copies of the live objects of a kind (one namespace or all)."""
        out = []
        for (res, ns, _name), obj in self.objects.items():
            if res == kind.key and not obj.deleted and (namespace is None or ns == namespace):
                out.append(copy.deepcopy(obj.raw))
        return out

    def _store(self, key, obj):
        # kmock's Object keeps each version; appending after a soft deletion re-creates it.
        if key in self.objects:
            history = self.objects[key].history
            history.append(copy.deepcopy(obj))
            if len(history) > KEPT_OBJECT_VERSIONS:
                del history[:-KEPT_OBJECT_VERSIONS]
        else:
            self.objects[key] = copy.deepcopy(obj)

    def _next_rv(self):
        self._rv += 1
        return str(self._rv)

    async def _emit(self, kind, type_, obj, prev=None):
        event = Event(int(obj["metadata"]["resourceVersion"]), type_, copy.deepcopy(obj), prev)
        self._history.append((kind, event))
        while len(self._history) > HISTORY_LIMIT:
            _, dropped = self._history.popleft()
            self._floor = dropped.rv
        await self._buses[kind.key].put(event)

    # ------------------------------------------------------------ bodies

    @staticmethod
    def _json_body(request, expect, what="body", allow_empty=False):
        raw = request.body or b""
        if not raw.strip():
            if allow_empty:
                return None
            raise bad_request(f"the {what} is empty")
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as e:  # includes UnicodeDecodeError
            raise bad_request(f"the {what} is not valid JSON: {e!r}")
        if not isinstance(data, expect):
            raise bad_request(f"the {what} must be a JSON {'object' if expect is dict else 'array'}")
        return data

    @staticmethod
    def _check_shape(kind, obj, name):
        """Just enough validation that later selector and finalizer code cannot trip."""
        meta = obj.get("metadata")
        if meta is None:
            obj["metadata"] = meta = {}
        if not isinstance(meta, dict):
            raise invalid(kind, name, "metadata: must be an object")
        for field in ("labels", "annotations"):
            value = meta.get(field)
            if value is not None and not (
                isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
            ):
                raise invalid(kind, name, f"metadata.{field}: must be a map of strings")
        finalizers = meta.get("finalizers")
        if finalizers is not None and not (
            isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)
        ):
            raise invalid(kind, name, "metadata.finalizers: must be a list of strings")
        for field, expected in (("kind", kind.kind), ("apiVersion", kind.api_version)):
            if obj.get(field) not in (None, "", expected):
                raise bad_request(
                    f"the {field} {obj.get(field)!r} does not match {kind.api_version} {kind.kind}"
                )

    @staticmethod
    def _request_namespace(request, kind, meta):
        """The namespace of a write: the URL's; a different one in the body is a 400."""
        if not kind.namespaced:
            return None
        body_ns = meta.get("namespace")
        if body_ns not in (None, "") and body_ns != request.namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        return request.namespace

    # ------------------------------------------------------------ create

    async def _create(self, request, kind):
        body = self._json_body(request, dict)
        self._check_shape(kind, body, _meta(body).get("name") or "")
        async with self._lock:
            obj = await self._create_object(request, kind, body)
            await self._after_write(kind, request.namespace)
        return json_response(obj, 201)

    async def _create_object(self, request, kind, body, name=None):
        meta = body["metadata"]
        namespace = self._request_namespace(request, kind, meta)
        name = name or meta.get("name")
        if not name:
            if not isinstance(meta.get("generateName"), str) or not meta["generateName"]:
                raise invalid(kind, "", "metadata.name: Required value: name or generateName is required")
            name = meta["generateName"] + _random_suffix()
            while self._current((kind.key, namespace, name)) is not None:
                name = meta["generateName"] + _random_suffix()
        if not isinstance(name, str) or "/" in name:
            raise invalid(kind, str(name), "metadata.name: Invalid value")
        key = (kind.key, namespace, name)
        if self._current(key) is not None:
            raise already_exists(kind, name)

        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        meta = obj["metadata"]
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace"):
            meta.pop(field, None)
        meta["name"] = name
        if namespace is not None:
            meta["namespace"] = namespace
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        meta["resourceVersion"] = self._next_rv()
        self._store(key, obj)
        await self._emit(kind, "ADDED", obj)
        return obj

    # ------------------------------------------------------------ update / patch

    async def _replace(self, request, kind):
        body = self._json_body(request, dict)
        self._check_shape(kind, body, request.name)
        meta = body["metadata"]
        if meta.get("name") not in (None, "", request.name):
            raise bad_request("the name of the object does not match the name on the URL")
        self._request_namespace(request, kind, meta)
        key = (kind.key, request.namespace, request.name)
        async with self._lock:
            stored = self._current(key)
            if stored is None:
                raise not_found(kind, request.name)
            if meta.get("resourceVersion") not in (None, "", stored["metadata"]["resourceVersion"]):
                raise conflict(kind, request.name)
            obj = await self._commit(kind, key, stored, self._limit_to_subresource(request, stored, body))
            await self._after_write(kind, request.namespace)
        return json_response(obj)

    async def _patch(self, request, kind):
        content_type = (header(request, "Content-Type") or "").split(";")[0].strip().lower()
        if content_type in MERGE_PATCH_TYPES:
            patch = self._json_body(request, dict, "patch")
        elif content_type == JSON_PATCH_TYPE:
            patch = self._json_body(request, list, "patch")
        else:
            raise api_error(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format: {content_type!r}",
            )
        key = (kind.key, request.namespace, request.name)
        async with self._lock:
            stored = self._current(key)
            if stored is None:
                if content_type != APPLY_PATCH_TYPE or request.subresource is not None:
                    raise not_found(kind, request.name)
                # Server-side apply creates what does not exist yet.
                self._check_shape(kind, patch, request.name)
                if patch["metadata"].get("name") not in (None, "", request.name):
                    raise bad_request("the name of the object does not match the name on the URL")
                obj = await self._create_object(request, kind, patch, name=request.name)
                await self._after_write(kind, request.namespace)
                return json_response(obj, 201)
            patched = self._apply_patch(kind, request.name, stored, patch)
            self._check_shape(kind, patched, request.name)
            # A resourceVersion in the patched result is a precondition, as in the apiserver.
            if patched["metadata"].get("resourceVersion") not in (
                None,
                "",
                stored["metadata"]["resourceVersion"],
            ):
                raise conflict(kind, request.name)
            obj = await self._commit(kind, key, stored, self._limit_to_subresource(request, stored, patched))
            await self._after_write(kind, request.namespace)
        return json_response(obj)

    @staticmethod
    def _check_json_patch(patch):
        """A JSON patch must be well-formed before it is applied: malformed is 400, failing is 422."""
        ops = {"add", "remove", "replace", "move", "copy", "test"}
        for op in patch:
            if not (isinstance(op, dict) and op.get("op") in ops and isinstance(op.get("path"), str)):
                raise bad_request(f"invalid JSON patch operation: {json.dumps(op)[:200]}")
            if op["op"] in ("move", "copy") and not isinstance(op.get("from"), str):
                raise bad_request(f"invalid JSON patch operation: {json.dumps(op)[:200]}")
            if op["op"] in ("add", "replace", "test") and "value" not in op:
                raise bad_request(f"invalid JSON patch operation: {json.dumps(op)[:200]}")

    @classmethod
    def _apply_patch(cls, kind, name, stored, patch):
        if isinstance(patch, list):
            cls._check_json_patch(patch)
        try:
            patched = kmock_dicts.patch_dict(copy.deepcopy(stored), patch)
        except jsonpatch.JsonPatchTestFailed as e:
            raise invalid(kind, name, f"the test operation of the JSON patch failed: {e}")
        except jsonpatch.InvalidJsonPatch as e:
            raise bad_request(f"invalid JSON patch: {e}")
        except (
            jsonpatch.JsonPatchConflict,
            jsonpointer.JsonPointerException,
            ValueError,
            TypeError,
            KeyError,
        ) as e:
            raise invalid(kind, name, f"the patch cannot be applied: {e}")
        if not isinstance(patched, dict):
            raise invalid(kind, name, "the patched object is not a JSON object")
        return dict(patched)

    @staticmethod
    def _limit_to_subresource(request, stored, proposed):
        """`/status` writes change only .status; main-resource writes keep the stored .status."""
        if request.subresource == "status":
            new = copy.deepcopy(stored)
            source = proposed
        else:
            new = copy.deepcopy(proposed)
            source = stored
        if "status" in source:
            new["status"] = copy.deepcopy(source["status"])
        else:
            new.pop("status", None)
        return new

    async def _commit(self, kind, key, stored, new):
        """Stores an update: server-owned metadata kept, generation, RV, finalizer removal."""
        meta, old_meta = new.setdefault("metadata", {}), stored["metadata"]
        for field in SERVER_OWNED_METADATA:
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        new["apiVersion"], new["kind"] = kind.api_version, kind.kind
        if new.get("spec") != stored.get("spec"):
            meta["generation"] = int(old_meta.get("generation") or 1) + 1
        if new == stored:
            return stored  # the apiserver writes nothing (and sends no event) for a no-op
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return await self._remove(kind, key, new)
        meta["resourceVersion"] = self._next_rv()
        self._store(key, new)
        await self._emit(kind, "MODIFIED", new, stored)
        return new

    # ------------------------------------------------------------ delete

    async def _delete(self, request, kind):
        options = self._json_body(request, dict, "delete options", allow_empty=True) or {}
        key = (kind.key, request.namespace, request.name)
        async with self._lock:
            stored = self._current(key)
            if stored is None:
                raise not_found(kind, request.name)
            preconditions = options.get("preconditions") or {}
            for field in ("uid", "resourceVersion"):
                wanted = preconditions.get(field) if isinstance(preconditions, dict) else None
                if wanted not in (None, "") and wanted != stored["metadata"].get(field):
                    raise conflict(kind, request.name)
            obj = await self._delete_object(kind, key, stored)
            await self._after_write(kind, request.namespace)
        return json_response(obj)

    async def _delete_collection(self, request, kind):
        self._json_body(request, dict, "delete options", allow_empty=True)
        matches = self._object_filter(request, kind)
        async with self._lock:
            victims = [o for o in self._live_objects(kind, request.namespace) if matches(o)]
            items = []
            for obj in sorted(victims, key=_sort_key):
                key = (kind.key, _meta(obj).get("namespace"), _meta(obj)["name"])
                items.append(await self._delete_object(kind, key, obj))
            for ns in {_meta(o).get("namespace") for o in victims}:
                await self._after_write(kind, ns)
        return json_response(self._list_body(kind, items))

    async def _delete_object(self, kind, key, stored):
        """Finalizers hold the object (deletionTimestamp, MODIFIED); otherwise it goes (DELETED)."""
        meta = stored["metadata"]
        if not meta.get("finalizers"):
            return await self._remove(kind, key, stored)
        if meta.get("deletionTimestamp"):
            return stored  # already terminating
        new = copy.deepcopy(stored)
        new["metadata"]["deletionTimestamp"] = now_rfc3339()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new["metadata"]["resourceVersion"] = self._next_rv()
        self._store(key, new)
        await self._emit(kind, "MODIFIED", new, stored)
        return new

    async def _remove(self, kind, key, last):
        # The DELETED event carries a new resourceVersion, so a watch resumed from any
        # earlier version still sees the deletion.
        final = copy.deepcopy(last)
        final["metadata"]["resourceVersion"] = self._next_rv()
        self._store(key, final)
        self.objects[key].delete()  # kmock's soft deletion keeps the history
        await self._emit(kind, "DELETED", final)
        return final

    # ------------------------------------------------------------ eviction and PDBs

    async def _evict(self, request):
        body = self._json_body(request, dict, "eviction")
        body_name = _meta(body).get("name")
        if body_name not in (None, "", request.name):
            raise bad_request("name in URL does not match name in Eviction object")
        key = (PODS.key, request.namespace, request.name)
        async with self._lock:
            pod = self._current(key)
            if pod is None:
                raise not_found(PODS, request.name)
            if not pod_ignores_pdb(pod):
                self._check_budgets(request.namespace, pod)
            await self._delete_object(PODS, key, pod)
            await self._after_write(PODS, request.namespace)
        success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        return json_response(success, 201)

    def _check_budgets(self, namespace, pod):
        labels = _meta(pod).get("labels")
        pdbs = [
            p
            for p in self._live_objects(PDBS, namespace)
            if label_selector_object_matches(_as_dict(p.get("spec")).get("selector"), labels)
        ]
        if len(pdbs) > 1:
            raise api_error(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        if not pdbs:
            return
        pdb = pdbs[0]
        budget = pdb_budget(pdb, self._live_objects(PODS, namespace))
        if not pod_is_ready(pod):
            policy = _as_dict(pdb.get("spec")).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            healthy_budget = budget["currentHealthy"] >= budget["desiredHealthy"] > 0
            if policy == "AlwaysAllow" or healthy_budget:
                return
        if budget["disruptionsAllowed"] <= 0:
            name = _meta(pdb)["name"]
            cause = (
                f"The disruption budget {name} needs {budget['desiredHealthy']} healthy pods "
                f"and has {budget['currentHealthy']} currently"
            )
            raise api_error(
                429,
                "TooManyRequests",
                f"Cannot evict pod as it would violate the pod's disruption budget. {cause}",
                causes=[{"reason": "DisruptionBudget", "message": cause}],
            )

    async def _after_write(self, kind, namespace):
        """The disruption controller's part: PDB status follows the pods (under _lock)."""
        if kind not in (PODS, PDBS) or namespace is None:
            return
        pods = self._live_objects(PODS, namespace)
        for pdb in sorted(self._live_objects(PDBS, namespace), key=_sort_key):
            budget = pdb_budget(pdb, pods)
            status = dict(_as_dict(pdb.get("status")))
            for field in ("currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods"):
                status[field] = budget[field]
            status["observedGeneration"] = _meta(pdb).get("generation", 1)
            if status != pdb.get("status"):
                new = copy.deepcopy(pdb)
                new["status"] = status
                key = (PDBS.key, namespace, _meta(pdb)["name"])
                await self._commit(PDBS, key, pdb, new)

    # ------------------------------------------------------------ list (kmock's, filtered)

    def _object_filter(self, request, kind):
        """Namespace, name (for named watches) and selectors as one predicate; 400 if malformed."""
        labels = parse_label_selector(request.params.get("labelSelector", ""))
        fields = parse_field_selector(request.params.get("fieldSelector", ""), kind)
        namespace = request.namespace if kind.namespaced else None
        name = request.name

        def matches(obj):
            meta = _meta(obj)
            return (
                (namespace is None or meta.get("namespace") == namespace)
                and (name is None or meta.get("name") == name)
                and labels(meta.get("labels"))
                and fields(obj)
            )

        return matches

    def _list_body(self, kind, items):
        return {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version,
            "metadata": {"resourceVersion": str(self._rv)},
            "items": items,
        }

    async def _serve_list(self, request):
        kind = self._kind_of(request)
        if kind is None:
            raise no_such_resource()
        matches = self._object_filter(request, kind)
        listed = await super()._serve_list(request)
        # No await between kmock's snapshot and reading _rv: the list's version is exact.
        items = sorted((i for i in listed["items"] if matches(i)), key=_sort_key)
        return self._list_body(kind, items)

    # ------------------------------------------------------------ watch

    async def _watch(self, request, kind, entry):
        params = request.params
        matches = self._object_filter(request, kind)
        timeout = self._watch_timeout(params.get("timeoutSeconds"))
        bookmarks = params.get("allowWatchBookmarks") == "true"
        send_initial = params.get("sendInitialEvents") == "true"
        since = self._watch_since(params.get("resourceVersion"))

        async with self._lock:
            bus = self._buses[kind.key]
            marker = await bus.mark()  # live events after this point reach this watch
            position = self._rv
            expired = since is not None and since < self._floor and not send_initial
            if since is None or send_initial:
                initial = [
                    {"type": "ADDED", "object": o}
                    for o in sorted(self._live_objects(kind, None), key=_sort_key)
                    if matches(o)
                ]
            elif expired:
                initial = []
            else:
                initial = [
                    out
                    for k, ev in self._history
                    if k == kind and ev.rv > since
                    for out in [self._project(ev, matches)]
                    if out is not None
                ]

        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        self._open_watches += 1
        try:
            await response.prepare(request._raw_request)
            entry["code"] = 200
            if expired:
                await self._write_event(response, self._expired_event(since))
            else:
                for event in initial:
                    await self._write_event(response, event)
                if send_initial:
                    await self._write_event(response, self._bookmark(kind, position, initial_end=True))
                await self._stream_live(
                    response, bus, marker, kind, matches, since or 0, position, timeout, bookmarks
                )
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away
        finally:
            self._open_watches -= 1
            with contextlib.suppress(Exception):
                await bus.unmark(marker)
        return response

    async def _stream_live(self, response, bus, marker, kind, matches, since, position, timeout, bookmarks):
        """Relays kmock's bus until the timeout, a drop, or the client leaving."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        stream = bus.stream(since=marker)
        pending = None  # one outstanding read of the bus; never cancelled mid-wait, so nothing is lost
        try:
            while (remaining := deadline - loop.time()) > 0:
                wait = min(remaining, self.bookmark_interval) if bookmarks else remaining
                if pending is None:
                    pending = asyncio.ensure_future(anext(stream))
                done, _ = await asyncio.wait({pending}, timeout=wait)
                if not done:
                    if bookmarks and deadline - loop.time() > 0:
                        await self._write_event(response, self._bookmark(kind, position))
                    continue
                event, pending = pending.result(), None
                if event is _DROP:
                    return
                position = max(position, event.rv)
                if event.rv <= since:
                    continue  # a watch from a future version skips what comes before it
                out = self._project(event, matches)
                if out is not None:
                    await self._write_event(response, out)
            if bookmarks:  # like the apiserver, a last bookmark before the timeout closes the watch
                await self._write_event(response, self._bookmark(kind, position))
        finally:
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending
            with contextlib.suppress(Exception):
                await stream.aclose()

    @staticmethod
    def _project(event, matches):
        """What one watch sees of an event: objects entering or leaving its selector too."""
        now = matches(event.obj)
        if event.type == "MODIFIED":
            before = matches(event.prev) if event.prev is not None else now
            if before and now:
                return {"type": "MODIFIED", "object": event.obj}
            if now:
                return {"type": "ADDED", "object": event.obj}
            if before:
                return {"type": "DELETED", "object": event.obj}
            return None
        return {"type": event.type, "object": event.obj} if now else None

    @staticmethod
    def _watch_timeout(value):
        if value in (None, ""):
            return DEFAULT_WATCH_TIMEOUT
        try:
            timeout = float(value)
        except ValueError:
            raise bad_request(f"invalid timeoutSeconds: {value!r}")
        if timeout < 0 or math.isnan(timeout):
            raise bad_request(f"invalid timeoutSeconds: {value!r}")
        return timeout or DEFAULT_WATCH_TIMEOUT

    @staticmethod
    def _watch_since(value):
        """None for "" / "0" (start with the current state), else the version to resume after."""
        if value in (None, "", "0"):
            return None
        try:
            since = int(value)
        except ValueError:
            raise bad_request(f"resourceVersion: Invalid value: {value!r}: must be an integer")
        if since < 0:
            raise bad_request(f"resourceVersion: Invalid value: {value!r}")
        return since

    def _expired_event(self, since):
        return {
            "type": "ERROR",
            "object": status_body(410, "Expired", f"too old resource version: {since} ({self._floor})"),
        }

    @staticmethod
    def _bookmark(kind, position, initial_end=False):
        meta = {"resourceVersion": str(position)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {
            "type": "BOOKMARK",
            "object": {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta},
        }

    @staticmethod
    async def _write_event(response, event):
        await response.write(json.dumps(event, separators=(",", ":")).encode("utf-8") + b"\n")

    # ------------------------------------------------------------ discovery (kmock routes here)

    async def _serve_server_version(self, request):
        return dict(SERVER_VERSION)

    async def _serve_api(self, request):
        host = header(request, "Host") or "127.0.0.1"
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
        }

    async def _serve_apis(self, request):
        groups = sorted({k.group for k in KINDS if k.group})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._api_group(g) for g in groups]}

    async def _serve_group(self, request):
        group = request.resource.group
        if not group or group not in {k.group for k in KINDS}:
            raise no_such_resource()
        return dict(self._api_group(group), kind="APIGroup", apiVersion="v1")

    async def _serve_version(self, request):
        group, version = request.resource.group, request.resource.version
        kinds = [k for k in KINDS if k.group == group and k.version == version]
        if not kinds:
            raise no_such_resource()
        resources = []
        for kind in kinds:
            resources.append(
                {
                    "name": kind.plural,
                    "singularName": kind.singular,
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": OBJECT_VERBS,
                    "shortNames": list(kind.short_names),
                    "categories": list(kind.categories),
                }
            )
            for sub in kind.subresources:
                resources.append(self._legacy_subresource(kind, sub))
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": kinds[0].api_version,
            "resources": resources,
        }

    @staticmethod
    def _api_group(group):
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in group_versions(group)]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    @staticmethod
    def _legacy_subresource(kind, sub):
        entry = {"name": f"{kind.plural}/{sub}", "singularName": "", "namespaced": kind.namespaced}
        if sub == "eviction":
            return dict(entry, group="policy", version="v1", kind="Eviction", verbs=["create"])
        return dict(entry, kind=kind.kind, verbs=STATUS_VERBS)

    @staticmethod
    def _aggregated_version(request):
        """The apidiscovery version an Accept header asks for first, if it asks for one."""
        for media_range in (header(request, "Accept") or "").split(","):
            kind, *params = [p.strip() for p in media_range.split(";")]
            params = dict(p.split("=", 1) for p in params if "=" in p)
            if kind in ("application/json", "*/*") and not params:
                return None  # plain JSON is preferred
            if params.get("g") == "apidiscovery.k8s.io" and params.get("as") == "APIGroupDiscoveryList":
                if params.get("v") in ("v2", "v2beta1"):
                    return params["v"]
        return None

    def _aggregated_discovery(self, core, version):
        groups = [""] if core else sorted({k.group for k in KINDS if k.group})
        items = []
        for group in groups:
            versions = []
            for v in group_versions(group):
                kinds = [k for k in KINDS if k.group == group and k.version == v]
                versions.append(
                    {
                        "version": v,
                        "resources": [self._aggregated_resource(k) for k in kinds],
                        "freshness": "Current",
                    }
                )
            items.append({"metadata": {"name": group}, "versions": versions})
        body = {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": f"apidiscovery.k8s.io/{version}",
            "metadata": {},
            "items": items,
        }
        content_type = f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
        return aiohttp.web.Response(
            body=json.dumps(body).encode("utf-8"), headers={"Content-Type": content_type, "Vary": "Accept"}
        )

    @staticmethod
    def _aggregated_resource(kind):
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        subresources = []
        for sub in kind.subresources:
            if sub == "eviction":
                subresources.append(
                    {
                        "subresource": sub,
                        "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
                        "verbs": ["create"],
                    }
                )
            else:
                subresources.append({"subresource": sub, "responseKind": gvk, "verbs": STATUS_VERBS})
        return {
            "resource": kind.plural,
            "responseKind": gvk,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "singularResource": kind.singular,
            "verbs": OBJECT_VERBS,
            "shortNames": list(kind.short_names),
            "categories": list(kind.categories),
            "subresources": subresources,
        }

    # ------------------------------------------------------------ control endpoints

    async def _control(self, request, name):
        method = request.method.value.upper()
        try:
            if method == "POST" and name == "reset":
                async with self._lock:
                    self.objects.clear()
                    self._next_rv()
                    self._compact()
                dropped = await self._drop_watches()
                return json_response({"ok": True, "resourceVersion": str(self._rv), "dropped": dropped})
            if method == "POST" and name == "compact":
                async with self._lock:
                    self._compact()
                return json_response({"ok": True, "resourceVersion": str(self._rv)})
            if method == "POST" and name == "drop-watches":
                return json_response({"ok": True, "dropped": await self._drop_watches()})
            if method == "GET" and name == "requests":
                return json_response(list(self._request_log))
            if method == "POST" and name == "requests/clear":
                self._request_log.clear()
                return json_response({"ok": True})
        except Exception as e:
            log(f"control {name} failed:\n{traceback.format_exc()}")
            return json_response({"error": repr(e)}, 500)
        return json_response({"error": f"no such control {method} /_peer/{name}"}, 404)

    def _compact(self):
        self._history.clear()
        self._floor = self._rv

    async def _drop_watches(self):
        open_now = self._open_watches
        for bus in list(self._buses.values()):
            await bus.put(_DROP)
        return open_now


def _sort_key(obj):
    meta = _meta(obj)
    return (meta.get("namespace") or "", meta.get("name") or "")


# --------------------------------------------------------------------------- process


def _watch_stdin():
    try:
        while sys.stdin.buffer.read1(65536):
            pass
    except Exception:
        pass
    os._exit(0)


async def serve(args, stdout):
    peer = KubePeer(bookmark_interval=args.bookmark_interval)
    async with peer:  # kmock's handler must be entered: it renders errors instead of raising them
        # handler_cancellation: a client that leaves ends its watch at once.
        runner = aiohttp.web.ServerRunner(aiohttp.web.Server(peer, handler_cancellation=True))
        await runner.setup()
        site = aiohttp.web.TCPSite(runner, "127.0.0.1", args.port)
        await site.start()
        port = runner.addresses[0][1]
        stdout.write(f"PORT {port}\n")
        stdout.flush()
        await asyncio.Event().wait()  # until the process exits


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument(
        "--bookmark-interval",
        type=float,
        default=10.0,
        help="seconds a watch with allowWatchBookmarks=true may be idle before a BOOKMARK",
    )
    parser.add_argument(
        "--keep-running",
        action="store_true",
        help="do not exit when stdin closes (for running it by hand in the background)",
    )
    args = parser.parse_args()
    if args.bookmark_interval <= 0:
        parser.error("--bookmark-interval must be positive")

    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # keep stdout for the PORT line only

    if not args.keep_running:
        threading.Thread(target=_watch_stdin, name="stdin-eof", daemon=True).start()
    try:
        asyncio.run(serve(args, real_stdout))
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
