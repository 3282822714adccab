#!/usr/bin/env python3
"""Checks kube_peer.py from the outside, over HTTP, with the standard library only.

Starts the peer (its PORT line, exit on stdin EOF, --keep-running), then
exercises each behaviour the peer promises: metadata stamping, selectors,
watch semantics (resume, 410 after compact, bookmarks, timeouts, selector
transitions), optimistic concurrency, the status subresource, finalizers,
eviction under PodDisruptionBudgets, every served resource, discovery, the
control endpoints and malformed input. Prints one line per check and
"N passed, M failed"; exits non-zero on any failure.

    python3 kube/tests/peer/check_peer.py [-k SUBSTRING]
"""

import argparse
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kube_peer.py")
BOOKMARK_INTERVAL = 0.3  # the peer under test sends idle bookmarks this often

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


class CheckFailed(AssertionError):
    pass


def expect(cond, message):
    if not cond:
        raise CheckFailed(message)


def expect_eq(actual, wanted, what):
    if actual != wanted:
        raise CheckFailed(f"{what}: got {actual!r}, wanted {wanted!r}")


# --------------------------------------------------------------------------- the peer process


class PeerProcess:
    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [sys.executable, PEER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.stderr_lines = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        lines = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True).start()
        try:
            self.first_line = lines.get(timeout=60).decode()
        except queue.Empty:
            self.kill()
            raise RuntimeError("the peer printed no PORT line within 60 s")
        m = re.fullmatch(r"PORT (\d+)\n", self.first_line)
        if not m:
            self.kill()
            raise RuntimeError(
                f"unexpected first line {self.first_line!r}; stderr: {''.join(self.stderr_lines)}"
            )
        self.port = int(m.group(1))

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line.decode(errors="replace"))

    def close_stdin(self):
        self.proc.stdin.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


# --------------------------------------------------------------------------- HTTP


class Response:
    def __init__(self, code, headers, raw):
        self.code, self.headers, self.raw = code, headers, raw
        try:
            self.body = json.loads(raw) if raw else None
        except ValueError:
            self.body = raw

    def __repr__(self):
        return f"<{self.code} {self.raw[:300]!r}>"


class Client:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def request(self, method, path, body=None, content_type="application/json", headers=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None and content_type:
            req.add_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return Response(resp.status, dict(resp.headers), resp.read())
        except urllib.error.HTTPError as e:
            return Response(e.code, dict(e.headers), e.read())

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def patch(self, path, body, content_type="application/merge-patch+json", **kw):
        return self.request("PATCH", path, body, content_type=content_type, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    # Helpers that insist on success.
    def ok(self, resp, codes=(200, 201)):
        expect(resp.code in codes, f"expected {codes}, got {resp!r}")
        return resp.body

    def create(self, collection, obj):
        return self.ok(self.post(collection, obj), (201,))

    def list(self, collection, **params):
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        return self.ok(self.get(collection + query), (200,))

    def names(self, collection, **params):
        return sorted(i["metadata"]["name"] for i in self.list(collection, **params)["items"])

    def watch(self, path, **params):
        params = dict({"watch": "true", "timeoutSeconds": "30"}, **params)
        return Watch(self.base + path + "?" + urllib.parse.urlencode(params))


class Watch:
    """A watch stream read on a thread; events arrive on a queue, None marks the end."""

    def __init__(self, url):
        self.events = queue.Queue()
        self.status = None
        opened = threading.Event()

        def run():
            try:
                resp = urllib.request.urlopen(url, timeout=60)
                self.status = resp.status
                opened.set()
                while True:
                    line = resp.readline()
                    if not line:
                        break
                    if line.strip():
                        self.events.put(json.loads(line))
            except urllib.error.HTTPError as e:
                self.status = e.code
                self.error_body = e.read()
            except Exception as e:  # noqa: BLE001 - reported through the queue
                self.events.put(("exception", repr(e)))
            finally:
                opened.set()
                self.events.put(None)

        threading.Thread(target=run, daemon=True).start()
        opened.wait(10)
        # The server registers the watch before sending headers; give it a moment to be live.
        time.sleep(0.05)

    def next(self, timeout=5.0, skip_bookmarks=True):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckFailed(f"no watch event within {timeout} s")
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                raise CheckFailed(f"no watch event within {timeout} s")
            if isinstance(event, tuple):
                raise CheckFailed(f"watch failed: {event[1]}")
            if skip_bookmarks and event is not None and event["type"] == "BOOKMARK":
                continue
            return event

    def expect_event(self, type_, name=None, timeout=5.0):
        event = self.next(timeout)
        expect(event is not None, f"the watch ended while waiting for {type_} {name}")
        got = (event["type"], event["object"].get("metadata", {}).get("name"))
        expect(
            got[0] == type_ and (name is None or got[1] == name), f"watch event {got}, wanted {(type_, name)}"
        )
        return event

    def expect_quiet(self, seconds=0.5):
        try:
            event = self.next(seconds)
        except CheckFailed:
            return
        raise CheckFailed(
            f"unexpected watch event {event and (event['type'], event['object'].get('metadata', {}).get('name'))}"
        )

    def expect_end(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            event = self.next(deadline - time.monotonic(), skip_bookmarks=True)
            if event is None:
                return
            raise CheckFailed(f"wanted the stream to end, got {event['type']}")
        raise CheckFailed("the stream did not end")


def pod(name, labels=None, node=None, phase=None, ready=None, finalizers=None):
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    if labels is not None:
        obj["metadata"]["labels"] = labels
    if finalizers is not None:
        obj["metadata"]["finalizers"] = finalizers
    if node is not None:
        obj["spec"]["nodeName"] = node
    if phase is not None:
        obj["status"] = {"phase": phase}
        if ready is not None:
            obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return obj


def healthy_pod(name, labels):
    return pod(name, labels, node="n1", phase="Running", ready=True)


def pdb(name, selector, min_available=None, max_unavailable=None, **spec):
    obj = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": selector, **spec},
    }
    if min_available is not None:
        obj["spec"]["minAvailable"] = min_available
    if max_unavailable is not None:
        obj["spec"]["maxUnavailable"] = max_unavailable
    return obj


def nodeclaim(name, **extra):
    obj = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name},
        "spec": {"nodeClassRef": {"name": "default"}},
    }
    obj.update(extra)
    return obj


def expect_status(resp, code, reason):
    expect(resp.code == code, f"expected HTTP {code}, got {resp!r}")
    body = resp.body
    expect(isinstance(body, dict) and body.get("kind") == "Status", f"expected a Status body, got {resp!r}")
    expect_eq(body.get("apiVersion"), "v1", "Status apiVersion")
    expect_eq(body.get("status"), "Failure", "Status status")
    expect_eq(body.get("code"), code, "Status code")
    expect_eq(body.get("reason"), reason, "Status reason")
    expect(isinstance(body.get("message"), str) and body["message"], "Status message")
    return body


def rv_of(obj):
    rv = obj["metadata"]["resourceVersion"]
    expect(isinstance(rv, str) and rv.isdigit(), f"resourceVersion {rv!r} is not a decimal string")
    return int(rv)


# --------------------------------------------------------------------------- checks


@check
def metadata_stamping(c):
    ns = "/api/v1/namespaces/meta/pods"
    created = c.create(ns, pod("p1", {"a": "1"}))
    meta = created["metadata"]
    expect(
        re.fullmatch(
            r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", meta.get("uid", "")
        ),
        f"uid {meta.get('uid')!r}",
    )
    expect(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta.get("creationTimestamp", "")),
        f"creationTimestamp {meta.get('creationTimestamp')!r}",
    )
    expect_eq(meta.get("generation"), 1, "generation at create")
    expect_eq(meta.get("namespace"), "meta", "namespace from the URL")
    expect_eq((created["apiVersion"], created["kind"]), ("v1", "Pod"), "apiVersion/kind")
    rv1 = rv_of(created)

    relabeled = c.ok(c.patch(ns + "/p1", {"metadata": {"labels": {"a": "2"}}}))
    expect(rv_of(relabeled) > rv1, "a write bumps resourceVersion")
    expect_eq(relabeled["metadata"]["generation"], 1, "generation after a metadata-only change")
    expect_eq(relabeled["metadata"]["uid"], meta["uid"], "uid is kept")
    expect_eq(
        relabeled["metadata"]["creationTimestamp"], meta["creationTimestamp"], "creationTimestamp is kept"
    )

    respecced = c.ok(c.patch(ns + "/p1", {"spec": {"nodeName": "n1"}}))
    expect_eq(respecced["metadata"]["generation"], 2, "generation after a spec change")
    replaced = dict(respecced, spec=dict(respecced["spec"], nodeName="n2"))
    replaced = c.ok(c.put(ns + "/p1", replaced))
    expect_eq(replaced["metadata"]["generation"], 3, "generation after a PUT that changes spec")

    noop = c.ok(c.patch(ns + "/p1", {"metadata": {"labels": {"a": "2"}}}))
    expect_eq(
        noop["metadata"]["resourceVersion"],
        replaced["metadata"]["resourceVersion"],
        "a no-op patch keeps resourceVersion",
    )

    # One global counter across kinds.
    node = c.create("/api/v1/nodes", {"metadata": {"name": "meta-node"}})
    expect(rv_of(node) > rv_of(replaced), "resourceVersion is global across kinds")
    expect("namespace" not in node["metadata"], "cluster-scoped objects have no namespace")

    listing = c.list(ns)
    expect_eq((listing.get("kind"), listing.get("apiVersion")), ("PodList", "v1"), "list kind/apiVersion")
    expect_eq(
        listing["metadata"].get("resourceVersion"),
        node["metadata"]["resourceVersion"],
        "list resourceVersion is the current one",
    )
    expect_eq([i["metadata"]["name"] for i in listing["items"]], ["p1"], "list items")
    claims = c.list("/apis/karpenter.sh/v1/nodeclaims")
    expect_eq(
        (claims.get("kind"), claims.get("apiVersion")),
        ("NodeClaimList", "karpenter.sh/v1"),
        "CRD list kind/apiVersion",
    )

    generated = c.create(ns, {"metadata": {"generateName": "gen-"}, "spec": {}})
    expect(
        re.fullmatch(r"gen-[a-z0-9]{5}", generated["metadata"]["name"]),
        f"generateName gave {generated['metadata']['name']!r}",
    )
    expect_status(c.post(ns, {"metadata": {"name": "x", "namespace": "elsewhere"}}), 400, "BadRequest")
    expect_status(c.post(ns, {"metadata": {}}), 422, "Invalid")


@check
def label_and_field_selectors(c):
    ns = "/api/v1/namespaces/sel/pods"
    c.create(ns, pod("a", {"app": "web", "tier": "fe"}, node="n1", phase="Running"))
    c.create(ns, pod("b", {"app": "web", "tier": "be"}, phase="Pending"))
    c.create(ns, pod("c", {"app": "db"}, node="n2", phase="Running"))
    c.create(ns, pod("d"))
    c.create("/api/v1/namespaces/sel2/pods", pod("e", {"app": "db"}))
    cases = [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d"]),
        ("app", ["a", "b", "c"]),
        ("!app", ["d"]),
        ("app in (web,db)", ["a", "b", "c"]),
        ("app in (web, db), tier notin (be)", ["a", "c"]),
        ("app notin (web)", ["c", "d"]),
        ("app=web,tier=fe", ["a"]),
        ("tier in (fe,be),app=web", ["a", "b"]),
    ]
    for selector, wanted in cases:
        expect_eq(c.names(ns, labelSelector=selector), wanted, f"labelSelector {selector!r}")
    field_cases = [
        ("metadata.name=a", ["a"]),
        ("metadata.name==c", ["c"]),
        ("metadata.name!=a", ["b", "c", "d"]),
        ("spec.nodeName=", ["b", "d"]),
        ("spec.nodeName!=", ["a", "c"]),
        ("spec.nodeName=n2", ["c"]),
        ("status.phase=Running", ["a", "c"]),
        ("status.phase!=Running", ["b", "d"]),
        ("metadata.namespace=sel", ["a", "b", "c", "d"]),
        ("metadata.namespace=other", []),
        ("status.phase=Running,spec.nodeName=n1", ["a"]),
    ]
    for selector, wanted in field_cases:
        expect_eq(c.names(ns, fieldSelector=selector), wanted, f"fieldSelector {selector!r}")
    expect_eq(
        c.names(ns, labelSelector="app=web", fieldSelector="status.phase=Pending"), ["b"], "both selectors"
    )
    expect_eq(
        c.names("/api/v1/pods", labelSelector="app=db"), ["c", "e"], "all-namespace list with a selector"
    )
    expect_status(c.get(ns + "?labelSelector=" + urllib.parse.quote("app in web")), 400, "BadRequest")
    expect_status(c.get(ns + "?labelSelector=" + urllib.parse.quote("a=b=c")), 400, "BadRequest")
    expect_status(c.get(ns + "?fieldSelector=spec.foo%3Dx"), 400, "BadRequest")
    expect_status(c.get("/api/v1/nodes?fieldSelector=spec.nodeName%3Dx"), 400, "BadRequest")
    expect_status(c.get(ns + "?watch=true&labelSelector=%21%21"), 400, "BadRequest")

    # A watch sees objects enter and leave its selector as ADDED and DELETED.
    rv = c.list(ns)["metadata"]["resourceVersion"]
    w = c.watch(ns, labelSelector="app=web", resourceVersion=rv)
    c.create(ns, pod("f", {"app": "web"}))
    w.expect_event("ADDED", "f")
    c.ok(c.patch(ns + "/f", {"metadata": {"labels": {"app": "db"}}}))
    w.expect_event("DELETED", "f")
    c.ok(c.patch(ns + "/f", {"metadata": {"labels": {"app": "db", "x": "y"}}}))
    c.ok(c.patch(ns + "/f", {"metadata": {"labels": {"app": "web"}}}))
    w.expect_event("ADDED", "f")
    c.ok(c.patch(ns + "/f", {"metadata": {"labels": {"app": "web", "v": "2"}}}))
    w.expect_event("MODIFIED", "f")
    c.create(ns, pod("g", {"app": "db"}))
    c.ok(c.delete(ns + "/f"))
    w.expect_event("DELETED", "f")
    w.expect_quiet()

    fw = c.watch(
        ns, fieldSelector="spec.nodeName=n9", resourceVersion=c.list(ns)["metadata"]["resourceVersion"]
    )
    c.ok(c.patch(ns + "/g", {"spec": {"nodeName": "n9"}}))
    fw.expect_event("ADDED", "g")
    fw.expect_quiet()


@check
def watch_semantics(c):
    ns = "/api/v1/namespaces/w/pods"
    rv0 = c.list(ns)["metadata"]["resourceVersion"]
    w = c.watch(ns, resourceVersion=rv0)
    c.create(ns, pod("x"))
    c.ok(c.patch(ns + "/x", {"metadata": {"labels": {"k": "v"}}}))
    c.ok(c.delete(ns + "/x"))
    added, modified, deleted = (
        w.expect_event("ADDED", "x"),
        w.expect_event("MODIFIED", "x"),
        w.expect_event("DELETED", "x"),
    )
    rvs = [rv_of(e["object"]) for e in (added, modified, deleted)]
    expect(int(rv0) < rvs[0] < rvs[1] < rvs[2], f"event resourceVersions increase: {rv0} {rvs}")
    expect_eq(modified["object"]["metadata"]["labels"], {"k": "v"}, "MODIFIED carries the new object")

    # Resuming from rv0 replays the same events from the history.
    replay = c.watch(ns, resourceVersion=rv0)
    for t in ("ADDED", "MODIFIED", "DELETED"):
        replay.expect_event(t, "x")
    resume = c.watch(ns, resourceVersion=str(rvs[1]))
    resume.expect_event("DELETED", "x")
    resume.expect_quiet(0.3)

    # No resourceVersion (or "0"): synthetic ADDED for what exists, then changes.
    c.create(ns, pod("y"))
    for rv in (None, "0"):
        fresh = c.watch(ns, **({"resourceVersion": rv} if rv else {}))
        fresh.expect_event("ADDED", "y")
        fresh.expect_quiet(0.3)

    # All namespaces and a single object.
    now = c.list("/api/v1/pods")["metadata"]["resourceVersion"]
    every = c.watch("/api/v1/pods", resourceVersion=now)
    single = c.watch(ns + "/y", resourceVersion=now)
    c.create(ns, pod("z"))
    c.create("/api/v1/namespaces/w2/pods", pod("z2"))
    c.ok(c.patch(ns + "/y", {"metadata": {"labels": {"t": "1"}}}))
    every.expect_event("ADDED", "z")
    every.expect_event("ADDED", "z2")
    every.expect_event("MODIFIED", "y")
    single.expect_event("MODIFIED", "y")
    single.expect_quiet(0.3)

    # timeoutSeconds ends the stream.
    now = c.list(ns)["metadata"]["resourceVersion"]
    started = time.monotonic()
    c.watch(ns, resourceVersion=now, timeoutSeconds="1").expect_end(5)
    expect(time.monotonic() - started < 4, "timeoutSeconds=1 ended the stream in time")

    # Bookmarks when allowed and idle, carrying a resourceVersion.
    bw = c.watch(ns, resourceVersion=now, allowWatchBookmarks="true", timeoutSeconds="5")
    mark = bw.next(3, skip_bookmarks=False)
    expect(mark is not None and mark["type"] == "BOOKMARK", f"wanted a BOOKMARK, got {mark}")
    expect_eq(mark["object"]["kind"], "Pod", "bookmark kind")
    expect(int(mark["object"]["metadata"]["resourceVersion"]) >= int(now), "bookmark resourceVersion")

    # sendInitialEvents: the state, then the initial-events-end bookmark.
    si = c.watch(
        ns, sendInitialEvents="true", allowWatchBookmarks="true", resourceVersionMatch="NotOlderThan"
    )
    names = sorted(si.expect_event("ADDED")["object"]["metadata"]["name"] for _ in range(2))
    expect_eq(names, ["y", "z"], "sendInitialEvents ADDED")
    end = si.next(3, skip_bookmarks=False)
    expect(
        end["type"] == "BOOKMARK"
        and end["object"]["metadata"].get("annotations", {}).get("k8s.io/initial-events-end") == "true",
        f"initial-events-end bookmark, got {end}",
    )

    # After a compaction a watch from an old version gets 410 Expired and ends.
    c.ok(c.post("/_peer/compact", {}))
    expired = c.watch(ns, resourceVersion=rv0)
    err = expired.next(3)
    expect(err is not None and err["type"] == "ERROR", f"wanted an ERROR event, got {err}")
    obj = err["object"]
    expect_eq(
        (obj.get("kind"), obj.get("apiVersion"), obj.get("status"), obj.get("reason"), obj.get("code")),
        ("Status", "v1", "Failure", "Expired", 410),
        "410 Status",
    )
    expect(
        obj.get("message", "").startswith("too old resource version"), f"410 message {obj.get('message')!r}"
    )
    expired.expect_end(3)
    # ... while a list with the old version is served, and a watch from the current one works.
    expect_eq(c.get(ns + "?resourceVersion=" + rv0).code, 200, "list with an old resourceVersion")
    current = c.list(ns)["metadata"]["resourceVersion"]
    ok = c.watch(ns, resourceVersion=current)
    c.create(ns, pod("after-compact"))
    ok.expect_event("ADDED", "after-compact")
    expect_status(c.get(ns + "?watch=true&resourceVersion=abc"), 400, "BadRequest")


@check
def optimistic_concurrency(c):
    ns = "/api/v1/namespaces/occ/pods"
    first = c.create(ns, pod("c1"))
    stale = first["metadata"]["resourceVersion"]
    second = c.ok(c.patch(ns + "/c1", {"metadata": {"labels": {"v": "2"}}}))
    current = second["metadata"]["resourceVersion"]

    expect_status(c.put(ns + "/c1", first), 409, "Conflict")
    body = expect_status(
        c.patch(ns + "/c1", {"metadata": {"resourceVersion": stale, "labels": {"v": "3"}}}), 409, "Conflict"
    )
    expect("c1" in body["message"], "the Conflict message names the object")
    expect_status(
        c.patch(
            ns + "/c1",
            [{"op": "replace", "path": "/metadata/resourceVersion", "value": stale}],
            "application/json-patch+json",
        ),
        409,
        "Conflict",
    )
    expect_status(
        c.patch(
            ns + "/c1",
            [{"op": "test", "path": "/metadata/labels/v", "value": "nope"}],
            "application/json-patch+json",
        ),
        422,
        "Invalid",
    )
    expect_status(c.delete(ns + "/c1", {"preconditions": {"resourceVersion": stale}}), 409, "Conflict")
    expect_eq(c.get(ns + "/c1").body["metadata"]["resourceVersion"], current, "failed writes changed nothing")

    fresh = dict(second, metadata=dict(second["metadata"], labels={"v": "put"}))
    put = c.ok(c.put(ns + "/c1", fresh))
    expect_eq(put["metadata"]["labels"], {"v": "put"}, "PUT with the current resourceVersion")
    patched = c.ok(
        c.patch(
            ns + "/c1",
            {"metadata": {"resourceVersion": put["metadata"]["resourceVersion"], "labels": {"v": "4"}}},
        )
    )
    expect_eq(patched["metadata"]["labels"]["v"], "4", "merge patch with the current resourceVersion")
    unconditional = dict(
        patched, metadata={k: v for k, v in patched["metadata"].items() if k != "resourceVersion"}
    )
    c.ok(c.put(ns + "/c1", unconditional))
    jp = c.ok(
        c.patch(
            ns + "/c1",
            [{"op": "add", "path": "/metadata/labels/j", "value": "p"}],
            "application/json-patch+json",
        )
    )
    expect_eq(jp["metadata"]["labels"].get("j"), "p", "JSON patch")

    body = expect_status(c.post(ns, pod("c1")), 409, "AlreadyExists")
    expect("c1" in body["message"], "AlreadyExists names the object")
    body = expect_status(c.get(ns + "/missing"), 404, "NotFound")
    expect('"missing" not found' in body["message"], f"NotFound message {body['message']!r}")
    expect_status(c.put(ns + "/missing", pod("missing")), 404, "NotFound")
    expect_status(c.patch(ns + "/missing", {"metadata": {}}), 404, "NotFound")
    expect_status(c.delete(ns + "/missing"), 404, "NotFound")
    expect_status(c.get("/apis/karpenter.sh/v1/nodeclaims/missing"), 404, "NotFound")


@check
def status_subresource(c):
    base = "/apis/karpenter.sh/v1/nodeclaims"
    created = c.create(base, nodeclaim("nc1", status={"phase": "seeded"}))
    expect_eq(created.get("status"), {"phase": "seeded"}, "create keeps a posted status (for seeding)")

    main = c.ok(c.patch(base + "/nc1", {"spec": {"a": 2}, "status": {"phase": "hacked"}}))
    expect_eq(main["spec"].get("a"), 2, "main patch changes spec")
    expect_eq(main["status"], {"phase": "seeded"}, "main patch keeps the stored status")
    expect_eq(main["metadata"]["generation"], 2, "generation after spec change")

    st = c.ok(
        c.patch(
            base + "/nc1/status",
            {"spec": {"a": 3}, "status": {"phase": "Ready"}, "metadata": {"labels": {"x": "y"}}},
        )
    )
    expect_eq(st["spec"].get("a"), 2, "status patch keeps spec")
    expect_eq(st["status"], {"phase": "Ready"}, "status patch changes status")
    expect("labels" not in st["metadata"], "status patch keeps metadata")
    expect_eq(st["metadata"]["generation"], 2, "status writes keep generation")
    expect(rv_of(st) > rv_of(main), "status writes bump resourceVersion")

    whole = dict(st, spec={"changed": True}, status={"conditions": [{"type": "Ready", "status": "True"}]})
    put = c.ok(c.put(base + "/nc1/status", whole))
    expect_eq(put["spec"], st["spec"], "status PUT keeps spec")
    expect_eq(put["status"], whole["status"], "status PUT replaces status")

    no_status = {k: v for k, v in put.items() if k != "status"}
    no_status["spec"] = {"a": 9}
    put_main = c.ok(c.put(base + "/nc1", no_status))
    expect_eq(put_main["status"], whole["status"], "main PUT keeps the stored status")
    expect_eq(put_main["spec"], {"a": 9}, "main PUT replaces spec")

    applied = c.ok(
        c.patch(
            base + "/nc1/status?fieldManager=t&force=true",
            {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "status": {"providerID": "aws:///i-1"}},
            "application/apply-patch+yaml",
        )
    )
    expect_eq(applied["status"].get("providerID"), "aws:///i-1", "apply on /status")
    smp = c.ok(
        c.patch(base + "/nc1", {"metadata": {"labels": {"s": "m"}}}, "application/strategic-merge-patch+json")
    )
    expect_eq(smp["metadata"]["labels"], {"s": "m"}, "strategic merge patch (as merge)")
    jp = c.ok(
        c.patch(
            base + "/nc1/status",
            [{"op": "add", "path": "/status/phase", "value": "J"}],
            "application/json-patch+json",
        )
    )
    expect_eq(jp["status"].get("phase"), "J", "JSON patch on /status")
    expect_eq(c.get(base + "/nc1/status").body["status"].get("phase"), "J", "GET /status")

    pods = "/api/v1/namespaces/st/pods"
    c.create(pods, pod("sp"))
    p = c.ok(c.patch(pods + "/sp/status", {"status": {"phase": "Running"}}))
    expect_eq(p["status"], {"phase": "Running"}, "pods/status")
    p = c.ok(c.patch(pods + "/sp", {"status": {"phase": "Failed"}}))
    expect_eq(p["status"], {"phase": "Running"}, "pods main patch keeps status")
    c.create("/apis/coordination.k8s.io/v1/namespaces/st/leases", {"metadata": {"name": "l"}, "spec": {}})
    expect_status(
        c.patch("/apis/coordination.k8s.io/v1/namespaces/st/leases/l/status", {"status": {}}), 404, "NotFound"
    )

    applied_new = c.ok(
        c.patch(base + "/nc-applied?fieldManager=t", nodeclaim("nc-applied"), "application/apply-patch+yaml"),
        (201,),
    )
    expect_eq(applied_new["metadata"]["generation"], 1, "apply creates a missing object")


@check
def finalizers_and_deletion(c):
    base = "/apis/karpenter.sh/v1/nodeclaims"
    created = c.create(
        base, nodeclaim("nc-fin", metadata={"name": "nc-fin", "finalizers": ["karpenter.sh/termination"]})
    )
    w = c.watch(base, resourceVersion=created["metadata"]["resourceVersion"])
    deleted = c.ok(c.delete(base + "/nc-fin"))
    expect(deleted["metadata"].get("deletionTimestamp"), "DELETE sets deletionTimestamp")
    expect(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", deleted["metadata"]["deletionTimestamp"]),
        "deletionTimestamp is RFC 3339 Z",
    )
    ev = w.expect_event("MODIFIED", "nc-fin")
    expect(ev["object"]["metadata"].get("deletionTimestamp"), "the MODIFIED event shows deletionTimestamp")
    still = c.ok(c.get(base + "/nc-fin"))
    expect_eq(
        still["metadata"]["finalizers"],
        ["karpenter.sh/termination"],
        "the object stays while finalizers remain",
    )
    again = c.ok(c.delete(base + "/nc-fin"))
    expect_eq(
        again["metadata"]["resourceVersion"],
        still["metadata"]["resourceVersion"],
        "a second DELETE changes nothing",
    )
    c.ok(c.patch(base + "/nc-fin", {"metadata": {"labels": {"draining": "true"}}}))
    w.expect_event("MODIFIED", "nc-fin")
    gone = c.ok(c.patch(base + "/nc-fin", {"metadata": {"finalizers": None}}))
    expect_eq(gone["metadata"]["name"], "nc-fin", "the last write answers with the object")
    expect_status(c.get(base + "/nc-fin"), 404, "NotFound")
    last = w.expect_event("DELETED", "nc-fin")
    expect(rv_of(last["object"]) > rv_of(gone) - 1, "DELETED carries a new resourceVersion")

    # Emptying finalizers with PUT and a JSON patch work the same way.
    c.create(base, nodeclaim("nc-fin2", metadata={"name": "nc-fin2", "finalizers": ["a", "b"]}))
    c.ok(c.delete(base + "/nc-fin2"))
    cur = c.ok(c.get(base + "/nc-fin2"))
    c.ok(c.put(base + "/nc-fin2", dict(cur, metadata=dict(cur["metadata"], finalizers=["b"]))))
    expect_eq(c.get(base + "/nc-fin2").code, 200, "one finalizer left")
    c.ok(
        c.patch(
            base + "/nc-fin2",
            [{"op": "remove", "path": "/metadata/finalizers"}],
            "application/json-patch+json",
        )
    )
    expect_status(c.get(base + "/nc-fin2"), 404, "NotFound")

    # Without finalizers deletion is immediate; the name can be reused (new uid).
    plain = c.create(base, nodeclaim("nc-plain"))
    w2 = c.watch(base, resourceVersion=plain["metadata"]["resourceVersion"])
    c.ok(c.delete(base + "/nc-plain"))
    w2.expect_event("DELETED", "nc-plain")
    expect_status(c.get(base + "/nc-plain"), 404, "NotFound")
    again = c.create(base, nodeclaim("nc-plain"))
    expect(again["metadata"]["uid"] != plain["metadata"]["uid"], "a re-created object gets a new uid")

    # deletecollection with a selector.
    pods = "/api/v1/namespaces/dc/pods"
    c.create(pods, pod("d1", {"g": "x"}))
    c.create(pods, pod("d2", {"g": "x"}))
    c.create(pods, pod("d3", {"g": "y"}))
    c.create(pods, pod("d4", {"g": "x"}, finalizers=["keep"]))
    out = c.ok(c.delete(pods + "?labelSelector=g%3Dx"))
    expect_eq(
        sorted(i["metadata"]["name"] for i in out["items"]), ["d1", "d2", "d4"], "deletecollection items"
    )
    expect_eq(c.names(pods), ["d3", "d4"], "deletecollection removes matches (finalizers hold d4)")


@check
def eviction_and_pdbs(c):
    ns = "/api/v1/namespaces/ev/pods"
    pdbs = "/apis/policy/v1/namespaces/ev/poddisruptionbudgets"
    c.create(ns, healthy_pod("web-1", {"app": "web"}))
    c.create(ns, healthy_pod("web-2", {"app": "web"}))
    c.create(pdbs, pdb("web-pdb", {"matchLabels": {"app": "web"}}, min_available=2))
    status = c.ok(c.get(pdbs + "/web-pdb"))["status"]
    expect_eq(
        {
            k: status.get(k)
            for k in ("currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")
        },
        {"currentHealthy": 2, "desiredHealthy": 2, "disruptionsAllowed": 0, "expectedPods": 2},
        "PDB status",
    )
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": "ev"},
    }
    body = expect_status(c.post(ns + "/web-1/eviction", eviction), 429, "TooManyRequests")
    expect(
        body["message"].startswith("Cannot evict pod as it would violate the pod's disruption budget."),
        f"429 message {body['message']!r}",
    )
    expect("web-pdb" in body["message"], "the 429 message names the PDB")
    expect(
        any("web-pdb" in cause.get("message", "") for cause in body.get("details", {}).get("causes", [])),
        "the 429 causes name the PDB",
    )
    expect_eq(c.get(ns + "/web-1").code, 200, "a refused eviction keeps the pod")

    c.create(ns, healthy_pod("loner", {"app": "other"}))
    ok = c.post(
        ns + "/loner/eviction", {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "loner"}}
    )
    expect_eq(ok.code, 201, "eviction without a PDB")
    expect_eq((ok.body.get("kind"), ok.body.get("status")), ("Status", "Success"), "eviction answer")
    expect_status(c.get(ns + "/loner"), 404, "NotFound")

    c.ok(c.patch(pdbs + "/web-pdb", {"spec": {"minAvailable": 1}}))
    expect_eq(c.get(pdbs + "/web-pdb").body["status"]["disruptionsAllowed"], 1, "PDB status follows its spec")
    expect_eq(c.post(ns + "/web-1/eviction", eviction).code, 201, "eviction within the budget")
    expect_eq(c.get(pdbs + "/web-pdb").body["status"]["currentHealthy"], 1, "PDB status follows the pods")
    expect_status(
        c.post(ns + "/web-2/eviction", dict(eviction, metadata={"name": "web-2"})), 429, "TooManyRequests"
    )

    # maxUnavailable as a percentage (of the matching pods), selected with matchExpressions:
    # disruptions allowed = maxUnavailable - unhealthy.
    ns2, pdbs2 = "/api/v1/namespaces/ev2/pods", "/apis/policy/v1/namespaces/ev2/poddisruptionbudgets"
    for i in range(4):
        c.create(ns2, healthy_pod(f"api-{i}", {"app": "api"}))
    c.create(
        pdbs2,
        pdb(
            "api-pdb",
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["api"]}]},
            max_unavailable="50%",
        ),
    )
    st = c.get(pdbs2 + "/api-pdb").body["status"]
    expect_eq(
        (st["disruptionsAllowed"], st["desiredHealthy"], st["expectedPods"]),
        (2, 2, 4),
        "maxUnavailable 50% of 4",
    )
    for i in (0, 1):  # two pods stop being ready: nothing more may go
        c.ok(
            c.patch(
                f"{ns2}/api-{i}/status", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
            )
        )
    expect_eq(
        c.get(pdbs2 + "/api-pdb").body["status"]["disruptionsAllowed"], 0, "maxUnavailable minus unhealthy"
    )
    expect_status(c.post(f"{ns2}/api-2/eviction", {}), 429, "TooManyRequests")
    c.ok(c.patch(f"{ns2}/api-1/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
    expect_eq(c.post(f"{ns2}/api-2/eviction", {}).code, 201, "one unhealthy pod under maxUnavailable 50%")

    # A pod without status is not healthy: it does not count towards the budget.
    ns3, pdbs3 = "/api/v1/namespaces/ev3/pods", "/apis/policy/v1/namespaces/ev3/poddisruptionbudgets"
    c.create(ns3, healthy_pod("h1", {"app": "q"}))
    c.create(ns3, pod("bare", {"app": "q"}))
    c.create(pdbs3, pdb("q-pdb", {"matchLabels": {"app": "q"}}, min_available=1))
    expect_eq(
        c.get(pdbs3 + "/q-pdb").body["status"]["currentHealthy"], 1, "a pod without status is not healthy"
    )
    expect_status(c.post(ns3 + "/h1/eviction", {}), 429, "TooManyRequests")
    # ... and, not ready under a healthy budget, it may go (IfHealthyBudget).
    expect_eq(c.post(ns3 + "/bare/eviction", {}).code, 201, "unhealthy pod under a healthy budget")
    # Pending pods ignore budgets, as in kube-apiserver.
    c.create(ns3, pod("pending", {"app": "q"}, phase="Pending"))
    expect_eq(c.post(ns3 + "/pending/eviction", {}).code, 201, "Pending pod")

    # Finalizers hold an evicted pod.
    c.create(ns3, pod("held", {"app": "z"}, finalizers=["x/y"], phase="Running", ready=True))
    expect_eq(c.post(ns3 + "/held/eviction", {}).code, 201, "eviction of a pod with a finalizer")
    expect(c.get(ns3 + "/held").body["metadata"].get("deletionTimestamp"), "the evicted pod is terminating")

    # Two PDBs over one pod: the apiserver refuses.
    c.create(pdbs3, pdb("z1", {"matchLabels": {"app": "z2"}}, min_available=0))
    c.create(pdbs3, pdb("z2", {}, min_available=0))
    c.create(ns3, healthy_pod("twice", {"app": "z2"}))
    expect_status(c.post(ns3 + "/twice/eviction", {}), 500, "InternalError")

    expect_status(c.post(ns + "/missing/eviction", {}), 404, "NotFound")
    expect_status(c.post(ns + "/web-2/eviction", raw=b"{nope"), 400, "BadRequest")
    expect_status(c.get(ns + "/web-2/eviction"), 405, "MethodNotAllowed")


SERVED = [
    ("/api/v1", "pods", "Pod", True),
    ("/api/v1", "nodes", "Node", False),
    ("/api/v1", "namespaces", "Namespace", False),
    ("/api/v1", "events", "Event", True),
    ("/api/v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ("/api/v1", "persistentvolumes", "PersistentVolume", False),
    ("/apis/apps/v1", "daemonsets", "DaemonSet", True),
    ("/apis/policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ("/apis/storage.k8s.io/v1", "storageclasses", "StorageClass", False),
    ("/apis/scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", False),
    ("/apis/coordination.k8s.io/v1", "leases", "Lease", True),
    ("/apis/events.k8s.io/v1", "events", "Event", True),
    ("/apis/karpenter.sh/v1", "nodepools", "NodePool", False),
    ("/apis/karpenter.sh/v1", "nodeclaims", "NodeClaim", False),
    ("/apis/karpenter.k8s.aws/v1", "ec2nodeclasses", "EC2NodeClass", False),
    ("/apis/karpenter.sh/v1alpha1", "nodeoverlays", "NodeOverlay", False),
]


@check
def every_resource(c):
    for prefix, plural, kind, namespaced in SERVED:
        collection = f"{prefix}/namespaces/res/{plural}" if namespaced else f"{prefix}/{plural}"
        rv = c.list(collection)["metadata"]["resourceVersion"]
        w = c.watch(collection, resourceVersion=rv)
        obj = c.create(collection, {"metadata": {"name": f"r-{plural}"}, "spec": {}})
        expect_eq(obj["kind"], kind, f"{plural} kind")
        w.expect_event("ADDED", f"r-{plural}")
        expect_eq(
            c.ok(c.get(f"{collection}/r-{plural}"))["metadata"]["uid"],
            obj["metadata"]["uid"],
            f"get {plural}",
        )
        listing = c.list(collection)
        expect_eq(listing["kind"], kind + "List", f"{plural} list kind")
        expect(f"r-{plural}" in [i["metadata"]["name"] for i in listing["items"]], f"list {plural}")
        if namespaced:
            everywhere = c.list(f"{prefix}/{plural}")
            expect(
                f"r-{plural}" in [i["metadata"]["name"] for i in everywhere["items"]],
                f"all-namespace list {plural}",
            )
            expect_status(c.get(f"{prefix}/{plural}/r-{plural}"), 404, "NotFound")
        else:
            expect_status(c.get(f"{prefix}/namespaces/res/{plural}"), 404, "NotFound")
        c.ok(c.delete(f"{collection}/r-{plural}"))
        event = w.next()
        while plural == "poddisruptionbudgets" and event and event["type"] == "MODIFIED":
            event = w.next()  # the peer keeps PDB status up to date
        expect(
            event is not None and event["type"] == "DELETED",
            f"DELETED {plural}, got {event and event['type']}",
        )
    expect_status(c.get("/apis/example.com/v1/widgets"), 404, "NotFound")
    expect_status(c.post("/apis/example.com/v1/widgets", {"metadata": {"name": "w"}}), 404, "NotFound")
    # Namespaces are objects too (kmock's own path parser gets these wrong).
    ns = c.create("/api/v1/namespaces", {"metadata": {"name": "team-a"}})
    expect_eq(
        c.ok(c.get("/api/v1/namespaces/team-a"))["metadata"]["uid"], ns["metadata"]["uid"], "get a namespace"
    )
    expect_eq(
        c.ok(c.patch("/api/v1/namespaces/team-a/status", {"status": {"phase": "Active"}}))["status"],
        {"phase": "Active"},
        "namespaces/status",
    )
    expect("team-a" in c.names("/api/v1/namespaces"), "list namespaces")


@check
def discovery(c):
    api = c.ok(c.get("/api"))
    expect_eq((api.get("kind"), api.get("versions")), ("APIVersions", ["v1"]), "/api")
    core = c.ok(c.get("/api/v1"))
    expect_eq((core.get("kind"), core.get("groupVersion")), ("APIResourceList", "v1"), "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    for name in (
        "pods",
        "pods/status",
        "pods/eviction",
        "nodes",
        "namespaces",
        "events",
        "persistentvolumeclaims",
        "persistentvolumes",
    ):
        expect(name in by_name, f"/api/v1 lists {name}")
    for r in core["resources"]:
        for field in ("name", "singularName", "namespaced", "kind", "verbs"):
            expect(field in r, f"{r['name']} has {field}")
    expect_eq(
        (by_name["pods"]["kind"], by_name["pods"]["singularName"], by_name["pods"]["namespaced"]),
        ("Pod", "pod", True),
        "pods entry",
    )
    expect_eq(
        (
            by_name["pods/eviction"]["kind"],
            by_name["pods/eviction"]["group"],
            by_name["pods/eviction"]["verbs"],
        ),
        ("Eviction", "policy", ["create"]),
        "pods/eviction entry",
    )
    expect_eq(by_name["nodes"]["namespaced"], False, "nodes are cluster-scoped")
    expect("watch" in by_name["pods"]["verbs"], "pods verbs")

    groups = {g["name"]: g for g in c.ok(c.get("/apis"))["groups"]}
    for g in (
        "apps",
        "policy",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "karpenter.sh",
        "karpenter.k8s.aws",
    ):
        expect(g in groups, f"/apis lists {g}")
    expect_eq(groups["karpenter.sh"]["preferredVersion"]["version"], "v1", "karpenter.sh preferred version")
    expect_eq(
        [v["version"] for v in groups["karpenter.sh"]["versions"]],
        ["v1", "v1alpha1"],
        "karpenter.sh versions",
    )
    group = c.ok(c.get("/apis/karpenter.sh"))
    expect_eq((group.get("kind"), group.get("name")), ("APIGroup", "karpenter.sh"), "/apis/karpenter.sh")
    ks = {r["name"]: r for r in c.ok(c.get("/apis/karpenter.sh/v1"))["resources"]}
    for name in ("nodepools", "nodeclaims", "nodeclaims/status", "nodepools/status"):
        expect(name in ks, f"karpenter.sh/v1 lists {name}")
    expect_eq(
        (ks["nodeclaims"]["kind"], ks["nodeclaims"]["namespaced"]), ("NodeClaim", False), "nodeclaims entry"
    )
    expect(
        "nodeoverlays" in {r["name"] for r in c.ok(c.get("/apis/karpenter.sh/v1alpha1"))["resources"]},
        "nodeoverlays",
    )
    expect(
        "ec2nodeclasses" in {r["name"] for r in c.ok(c.get("/apis/karpenter.k8s.aws/v1"))["resources"]},
        "ec2nodeclasses",
    )
    expect_status(c.get("/apis/karpenter.sh/v9"), 404, "NotFound")
    expect_status(c.get("/apis/nothing.example.com"), 404, "NotFound")
    version = c.ok(c.get("/version"))
    expect_eq(
        (version.get("gitVersion"), version.get("major"), version.get("minor")),
        ("v1.33.0", "1", "33"),
        "/version",
    )

    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    agg = c.get("/apis", headers={"Accept": accept})
    expect(
        agg.code == 200 and "as=APIGroupDiscoveryList" in agg.headers.get("Content-Type", ""),
        f"aggregated content type {agg.headers.get('Content-Type')}",
    )
    expect_eq(agg.body.get("kind"), "APIGroupDiscoveryList", "aggregated kind")
    ksh = next(i for i in agg.body["items"] if i["metadata"]["name"] == "karpenter.sh")
    expect_eq(
        [v["version"] for v in ksh["versions"]], ["v1", "v1alpha1"], "aggregated versions, preferred first"
    )
    claims = next(r for r in ksh["versions"][0]["resources"] if r["resource"] == "nodeclaims")
    expect_eq(
        (claims["scope"], claims["responseKind"]["kind"], [s["subresource"] for s in claims["subresources"]]),
        ("Cluster", "NodeClaim", ["status"]),
        "aggregated nodeclaims",
    )
    core_agg = c.get("/api", headers={"Accept": accept}).body
    pods = next(r for r in core_agg["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    expect_eq(
        sorted(s["subresource"] for s in pods["subresources"]),
        ["eviction", "status"],
        "aggregated pods subresources",
    )
    expect_eq(
        c.get("/apis", headers={"Accept": "application/json"}).body.get("kind"), "APIGroupList", "plain /apis"
    )


@check
def control_endpoints(c):
    c.ok(c.post("/_peer/requests/clear", {}))
    ns = "/api/v1/namespaces/ctl/pods"
    c.list(ns)
    c.watch(ns, timeoutSeconds="1").expect_end(5)
    created = c.create(ns, pod("r1"))
    c.get(ns + "/r1")
    c.put(ns + "/r1", created)
    c.patch(ns + "/r1", {"metadata": {"labels": {"a": "b"}}})
    c.patch(ns + "/r1/status", {"status": {"phase": "Running"}})
    c.post(ns + "/r1/eviction", {})
    c.get(ns + "/r1")  # 404 now
    c.create(ns, pod("r2"))
    c.delete(ns + "/r2")
    c.delete(ns)
    c.get("/api/v1")  # discovery is not logged
    c.get("/apis/karpenter.sh/v1/nodeclaims")
    log = c.ok(c.get("/_peer/requests"))
    got = [(e["verb"], e["resource"], e["subresource"], e["namespace"], e["name"], e["code"]) for e in log]
    wanted = [
        ("list", "pods", None, "ctl", None, 200),
        ("watch", "pods", None, "ctl", None, 200),
        ("create", "pods", None, "ctl", None, 201),
        ("get", "pods", None, "ctl", "r1", 200),
        ("update", "pods", None, "ctl", "r1", 200),
        ("patch", "pods", None, "ctl", "r1", 200),
        ("patch", "pods", "status", "ctl", "r1", 200),
        ("create", "pods", "eviction", "ctl", "r1", 201),
        ("get", "pods", None, "ctl", "r1", 404),
        ("create", "pods", None, "ctl", None, 201),
        ("delete", "pods", None, "ctl", "r2", 200),
        ("deletecollection", "pods", None, "ctl", None, 200),
        ("list", "nodeclaims", None, None, None, 200),
    ]
    expect_eq(got, wanted, "request log")
    expect_eq((log[-1]["group"], log[-1]["version"]), ("karpenter.sh", "v1"), "request log group/version")
    expect_eq((log[0]["group"], log[0]["version"]), ("", "v1"), "request log core group")
    c.ok(c.post("/_peer/requests/clear", {}))
    expect_eq(c.ok(c.get("/_peer/requests")), [], "cleared request log")

    # drop-watches ends open streams.
    w = c.watch(ns, timeoutSeconds="60")
    dropped = c.ok(c.post("/_peer/drop-watches", {}))
    expect(dropped.get("dropped", 0) >= 1, f"drop-watches counted {dropped}")
    w.expect_end(3)

    # A client that disconnects ends its watch on the server (nothing leaks).
    c.ok(c.post("/_peer/drop-watches", {}))
    time.sleep(0.3)
    port = int(c.base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {ns}?watch=true HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        expect(s.recv(4096).startswith(b"HTTP/1.1 200"), "raw watch started")
        expect_eq(c.ok(c.post("/_peer/drop-watches", {}))["dropped"], 1, "one open watch")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {ns}?watch=true HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.recv(4096)
    time.sleep(0.3)
    expect_eq(c.ok(c.post("/_peer/drop-watches", {}))["dropped"], 0, "a disconnected watch is closed")

    # reset wipes objects, keeps the counter increasing, closes watches.
    before = c.create(ns, pod("r3"))
    c.create("/api/v1/nodes", {"metadata": {"name": "ctl-node"}})
    w = c.watch(ns, resourceVersion=before["metadata"]["resourceVersion"], timeoutSeconds="60")
    c.ok(c.post("/_peer/reset", {}))
    w.expect_end(3)
    expect_eq(c.names(ns), [], "reset removes pods")
    expect_eq(c.names("/api/v1/nodes"), [], "reset removes nodes")
    after = c.create(ns, pod("r3"))
    expect(rv_of(after) > rv_of(before), "the counter keeps increasing after reset")
    old = c.watch(ns, resourceVersion=before["metadata"]["resourceVersion"])
    expect_eq(old.next(3)["object"].get("code"), 410, "a pre-reset resourceVersion is expired")
    expect_eq(c.get("/_peer/nonsense").code, 404, "unknown control endpoint")


@check
def malformed_input(c):
    ns = "/api/v1/namespaces/bad/pods"
    c.create(ns, pod("ok"))
    expect_status(c.post(ns, raw=b"{not json"), 400, "BadRequest")
    expect_status(c.post(ns, raw=b""), 400, "BadRequest")
    expect_status(c.post(ns, [1, 2]), 400, "BadRequest")
    expect_status(c.post(ns, {"metadata": "nope"}), 422, "Invalid")
    expect_status(c.post(ns, {"metadata": {"name": "l", "labels": {"a": 1}}}), 422, "Invalid")
    expect_status(c.post(ns, {"kind": "Node", "metadata": {"name": "k"}}), 400, "BadRequest")
    expect_status(c.put(ns + "/ok", raw=b"]["), 400, "BadRequest")
    expect_status(c.put(ns + "/ok", {"metadata": {"name": "other"}}), 400, "BadRequest")
    expect_status(c.patch(ns + "/ok", None, raw=b"{"), 400, "BadRequest")
    expect_status(c.patch(ns + "/ok", {"op": "add"}, "application/json-patch+json"), 400, "BadRequest")
    expect_status(
        c.patch(ns + "/ok", [{"op": "bogus", "path": "/x"}], "application/json-patch+json"), 400, "BadRequest"
    )
    expect_status(c.patch(ns + "/ok", [1], "application/json-patch+json"), 400, "BadRequest")
    expect_status(
        c.patch(ns + "/ok", [{"op": "remove", "path": "/nope/deeper"}], "application/json-patch+json"),
        422,
        "Invalid",
    )
    expect_status(c.patch(ns + "/ok", {"metadata": {"labels": "scalar"}}), 422, "Invalid")
    expect_status(c.patch(ns + "/ok", {"metadata": {"finalizers": "x"}}), 422, "Invalid")
    expect_status(c.patch(ns + "/ok", {"a": 1}, "text/plain"), 415, "UnsupportedMediaType")
    expect_status(c.post(ns, raw=b'{"metadata": {"name": "\xff\xfe"}}'), 400, "BadRequest")
    expect_status(c.post(ns, raw=b"[" * 100000), 400, "BadRequest")
    expect_status(c.patch(ns + "/ok", None, raw=b'{"a":' * 50000), 400, "BadRequest")
    expect_status(c.delete(ns + "/ok", raw=b"{x"), 400, "BadRequest")
    expect_status(c.get(ns + "?watch=true&timeoutSeconds=soon"), 400, "BadRequest")
    expect_status(c.get(ns + "/ok/status/deeper/still"), 404, "NotFound")
    expect_status(c.post(ns, {"metadata": {"generateName": 7}}), 422, "Invalid")
    # Malformed PDBs and pod statuses must not break pod writes (the PDB status refresh reads them).
    pdbs = "/apis/policy/v1/namespaces/bad/poddisruptionbudgets"
    c.create(
        pdbs,
        {
            "metadata": {"name": "p1"},
            "spec": {"selector": {"matchLabels": "x", "matchExpressions": 3}, "minAvailable": "lots"},
        },
    )
    c.create(pdbs, {"metadata": {"name": "p2"}, "spec": "nonsense", "status": ["x"]})
    c.create(
        pdbs,
        {
            "metadata": {"name": "p3"},
            "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}, 5]}},
        },
    )
    c.create(ns, dict(pod("weird", {"a": "b"}), status="not an object"))
    c.ok(c.patch(ns + "/weird", {"metadata": {"labels": {"a": "c"}}}))
    expect_eq(c.post(ns + "/weird/eviction", {}).code, 201, "eviction ignores malformed PDBs")
    expect_status(c.request("PUT", ns, {"metadata": {}}), 405, "MethodNotAllowed")
    # Not even HTTP.
    with socket.create_connection(("127.0.0.1", int(c.base.rsplit(":", 1)[1])), timeout=5) as s:
        s.sendall(b"\x00\x01garbage\r\n\r\n")
        try:
            s.recv(1024)
        except OSError:
            pass
    expect_eq(c.get("/version").code, 200, "the peer survives malformed input")
    expect_eq(c.get(ns + "/ok").code, 200, "state survives malformed input")


def process_contract():
    """PORT line, exit on stdin EOF, --keep-running."""
    p = PeerProcess()
    try:
        expect(re.fullmatch(r"PORT \d+\n", p.first_line), f"first line {p.first_line!r}")
        with socket.create_connection(("127.0.0.1", p.port), timeout=5):
            pass
        p.close_stdin()
        try:
            p.proc.wait(10)
        except subprocess.TimeoutExpired:
            raise CheckFailed("the peer did not exit within 10 s of stdin EOF")
        rest = p.proc.stdout.read()
        expect_eq(rest, b"", "stdout after the PORT line")
    finally:
        p.kill()
    k = PeerProcess("--keep-running")
    try:
        k.close_stdin()
        time.sleep(1.5)
        expect(k.proc.poll() is None, "--keep-running survives stdin EOF")
        expect_eq(Client(k.port).get("/version").code, 200, "--keep-running still serves")
    finally:
        k.kill()


def main():
    parser = argparse.ArgumentParser(description="checks kube_peer.py")
    parser.add_argument("-k", default="", help="only checks whose name contains this")
    args = parser.parse_args()

    passed = failed = 0

    def run(name, fn, *fn_args):
        nonlocal passed, failed
        if args.k not in name:
            return
        started = time.monotonic()
        try:
            fn(*fn_args)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failed += 1
            detail = str(e) if isinstance(e, CheckFailed) else traceback.format_exc()
            print(f"FAIL {name}: {detail}", flush=True)
        else:
            passed += 1
            print(f"ok   {name} ({time.monotonic() - started:.1f}s)", flush=True)

    run("process_contract", process_contract)
    peer = PeerProcess("--bookmark-interval", str(BOOKMARK_INTERVAL))
    try:
        client = Client(peer.port)
        for fn in CHECKS:
            run(fn.__name__, fn, client)
    finally:
        still_running = peer.proc.poll() is None
        peer.close_stdin()
        try:
            peer.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        peer.kill()
        errors = [l for l in peer.stderr_lines if "Traceback" in l or "failed" in l]
        if not still_running:
            failed += 1
            print("FAIL the peer died during the checks", flush=True)
        if errors:
            print("peer stderr:\n" + "".join(peer.stderr_lines), flush=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
