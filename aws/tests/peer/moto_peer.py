#!/usr/bin/env python3
"""AWS test peer for dovetail's integration tests.

Runs moto's combined server app (every service: EC2, SQS, SSM, IAM, ...) on
127.0.0.1 with an ephemeral port, wrapped in a thin WSGI middleware that adds
the EC2 behaviour moto lacks:

* CreateFleet honours ClientToken (cached response replayed for the same
  token + same parameters, ``IdempotentParameterMismatch`` otherwise).
* CreateFleet capacity faults: overrides whose (instance type, zone, capacity
  type) is marked unavailable are stripped before moto sees the request and
  reported back in the response's ``errorSet`` as
  ``InsufficientInstanceCapacity``, like real EC2 does for instant fleets.
* Armed throttling: the next N calls of an EC2 action answer HTTP 503
  ``RequestLimitExceeded``.
* A log of every EC2 call (action + HTTP status; throttled calls show 503,
  calls moto crashes on show 500 with an EC2 ``InternalError`` body).

CreateFleet details: an override's zone is its AvailabilityZone, else its
subnet's zone in moto. Capacity type = DefaultTargetCapacityType (default
on-demand). moto ignores Priority and launches the first override it is given,
so the remaining overrides are forwarded sorted by Priority (configs ordered by
their best override): the highest-priority available override is launched.
When nothing is left, moto is not called and the answer has a new fake fleetId
(unknown to moto), an empty fleetInstanceSet and the errorSet. Responses with
HTTP 200 (including capacity errors) are cached under the ClientToken.
EC2 requests are recognised by the SigV4 credential scope (service ``ec2``).

Capacity reservations (moto has none):

* DescribeCapacityReservations is answered by the peer from the set posted to
  /_peer/capacity-reservations (only reservations whose zone is in the request's
  region). CapacityReservationId.N (unknown id: HTTP 400
  ``InvalidCapacityReservationId.NotFound``), MaxResults / NextToken (the token is
  a plain index) and the filters tag:KEY, tag-key, instance-type,
  availability-zone, state, owner-id and reservation-type (values may use the
  * and ? wildcards; other filters are ignored and logged).
* CreateFleet: a launch template config whose template version (as stored by
  moto: data["CapacityReservationSpecification"]["CapacityReservationTarget"]
  ["CapacityReservationId"]) targets a reservation the peer knows is checked per
  override before moto sees it; failures go to the errorSet: ``Unsupported`` when
  the override's instance type (else the template's) or zone (AvailabilityZone,
  else the subnet's) differs from the reservation's, or when the capacity type
  does not fit the reservation (on-demand for default reservations,
  capacity-block for capacity blocks; spot never); ``ReservationCapacityExceeded``
  when the reservation is not active or has no available instance. Overrides of
  such configs are not subject to /_peer/capacity. capacity-block fleets are
  forwarded to moto as on-demand (moto launches nothing for capacity-block).
  Every instance moto launches from such a config takes one available instance
  of the reservation; instances beyond what is available are terminated again,
  left out of the answer and reported as ``ReservationCapacityExceeded``. A
  template targeting a reservation the peer does not know is launched as usual.
* DescribeInstances answers get ``capacityReservationId`` (and, for capacity
  blocks, ``instanceLifecycle`` = capacity-block) right after the ``instanceId``
  of every instance launched into a reservation. A reservation gets its instance
  back (once) when TerminateInstances for it succeeds, or when moto reports the
  instance terminated or gone (e.g. DeleteFleets with TerminateInstances).

Spot prices: while the table posted to /_peer/spot-prices is non-empty,
DescribeSpotPriceHistory is answered from it (entries whose zone is in the
request's region; productDescription always Linux/UNIX, timestamp = when the
table was posted): InstanceType.N, ProductDescription.N, AvailabilityZone,
MaxResults / NextToken (plain index) and the filters instance-type,
availability-zone and product-description (wildcards as above; other filters,
StartTime and EndTime are ignored). An empty table forwards to moto again.

Control endpoints (JSON in/out), never forwarded to moto:

  POST /_peer/capacity  {"unavailable": [{"instance_type": "m5.large",
                          "zone": "us-east-1a", "capacity_type": "spot"}]}
                        replaces the set of offerings without capacity;
                        omitted capacity_type = spot and on-demand,
                        omitted zone = every zone.
  GET  /_peer/capacity  the current set.
  POST /_peer/throttle  {"action": "CreateFleet", "count": 3}
                        (count 0 disarms; several actions may be armed).
  GET  /_peer/calls     [{"action": "CreateFleet", "status": 200}, ...]
  POST /_peer/ssm       {"parameters": {"/aws/service/...": "ami-..."}}
                        public SSM parameters (moto refuses /aws/ names).
  POST /_peer/capacity-reservations
                        {"reservations": [{"id": "cr-0123456789abcdef0",
                          "instance_type": "m5.large", "zone": "us-east-1a",
                          "total": 2, "available": 2,
                          "reservation_type": "default",
                          "state": "active",
                          "start_time": "2026-01-01T00:00:00Z",
                          "end_time": "2026-12-31T00:00:00Z",
                          "owner_id": "123456789012",
                          "tags": {"k": "v"}}]}
                        replaces the set of capacity reservations; required:
                        id (cr-...), instance_type, zone, total (>= 0);
                        optional: available (0..total, default total),
                        reservation_type ("default" | "capacity-block", default
                        "default"), state (an EC2 CapacityReservationState,
                        default "active"), start_time / end_time (ISO 8601,
                        start default now; no end_time = endDateType
                        unlimited), owner_id (default the account id), tags.
                        Unknown keys and bad values answer 400. Instances
                        launched earlier keep their capacityReservationId but
                        no longer count against any reservation.
  GET  /_peer/capacity-reservations
                        {"reservations": [...]} as posted, normalised, with the
                        current available and "instances" (ids holding one).
  POST /_peer/spot-prices {"prices": [{"instance_type": "m5.large",
                          "zone": "us-east-1a", "price": "0.0312"}]}
                        replaces the spot price table (price: a decimal string
                        or number >= 0); {"prices": []} hands
                        DescribeSpotPriceHistory back to moto.
  GET  /_peer/spot-prices {"prices": [...]} the current table.
  POST /_peer/reset     clears calls, capacity, throttles, the client-token
                        cache, capacity reservations (and which instances hold
                        them), spot prices and moto's own state
                        (/moto-api/reset).

Process contract: prints exactly one line ``PORT <n>`` to stdout once the
socket is bound, logs only to stderr, and exits as soon as stdin reaches EOF
(the spawning test holds the pipe).
"""

import argparse
import fnmatch
import io
import json
import os
import re
import sys
import threading
import traceback
import uuid
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from urllib.parse import parse_qsl, urlencode
from xml.sax.saxutils import escape

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"

ICE_CODE = "InsufficientInstanceCapacity"
RESERVATION_EXCEEDED_CODE = "ReservationCapacityExceeded"
UNSUPPORTED_CODE = "Unsupported"

# EC2's CapacityReservationState enum (botocore ec2 2016-11-15).
RESERVATION_STATES = (
    "active", "expired", "cancelled", "pending", "failed", "scheduled", "payment-pending",
    "payment-failed", "assessing", "delayed", "unsupported", "unavailable",
)
RESERVATION_TYPES = ("default", "capacity-block")
_RESERVATION_KEYS = {
    "id", "instance_type", "zone", "total", "available", "reservation_type", "state",
    "start_time", "end_time", "owner_id", "tags",
}
_RESERVATION_ID_RE = re.compile(r"^cr-[0-9a-zA-Z]+$")
_SPOT_KEYS = {"instance_type", "zone", "price"}
SPOT_PRODUCT = "Linux/UNIX"

_OVERRIDE_RE = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.(.+)$")
_CONFIG_RE = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.(.+)$")

# Request override field -> element name in FleetLaunchTemplateOverrides (response).
_OVERRIDE_FIELDS = [
    ("InstanceType", "instanceType"),
    ("MaxPrice", "maxPrice"),
    ("SubnetId", "subnetId"),
    ("AvailabilityZone", "availabilityZone"),
    ("WeightedCapacity", "weightedCapacity"),
    ("Priority", "priority"),
    ("ImageId", "imageId"),
    ("AvailabilityZoneId", "availabilityZoneId"),
]
_SPEC_FIELDS = [
    ("LaunchTemplateId", "launchTemplateId"),
    ("LaunchTemplateName", "launchTemplateName"),
    ("Version", "version"),
]


def log(msg):
    sys.stderr.write(f"moto_peer: {msg}\n")
    sys.stderr.flush()


def _xml(tag, value):
    return f"<{tag}>{escape(str(value))}</{tag}>"


def _iso(dt):
    """EC2's timestamp format: 2026-12-31T00:00:00.000Z."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _now():
    return datetime.now(timezone.utc).replace(microsecond=0)


def _parse_time(value, what):
    if not isinstance(value, str):
        raise ValueError(f"{what} must be an ISO 8601 string, got {value!r}")
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{what} is not ISO 8601: {value!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt


def _indexed(params, prefix):
    """Values of an EC2 query list: Prefix.1, Prefix.2, ... in index order."""
    found = []
    for k, v in params.items():
        if k.startswith(prefix + "."):
            rest = k[len(prefix) + 1 :]
            if rest.isdigit():
                found.append((int(rest), v))
    return [v for _, v in sorted(found)]


def _filters(params):
    """[(name, [values])] from Filter.N.Name / Filter.N.Value.M."""
    names = {}
    for k, v in params.items():
        m = re.match(r"^Filter\.(\d+)\.Name$", k)
        if m:
            names[int(m.group(1))] = v
    return [(names[n], _indexed(params, f"Filter.{n}.Value")) for n in sorted(names)]


def _matches(value, patterns):
    """EC2 filter semantics: any value matches; * and ? are wildcards."""
    if value is None:
        return False
    return any(fnmatch.fnmatchcase(str(value), str(p)) for p in patterns)


def _page(items, params):
    """(page, next token or None) for MaxResults / NextToken (a plain index)."""
    token = params.get("NextToken") or ""
    start = 0
    if token:
        if not token.isdigit() or int(token) > len(items):
            raise _Ec2Error("InvalidParameterValue", f"Invalid value '{token}' for NextToken")
        start = int(token)
    max_results = params.get("MaxResults") or ""
    if not max_results:
        return items[start:], None
    try:
        n = int(max_results)
    except ValueError:
        n = 0
    if n < 1:
        raise _Ec2Error("InvalidParameterValue", f"Invalid value '{max_results}' for MaxResults")
    end = start + n
    return items[start:end], (str(end) if end < len(items) else None)


def _zone_in_region(zone, region):
    return str(zone).startswith(region)


class _Ec2Error(Exception):
    """An EC2 error answer (HTTP 400) from a call the peer serves itself."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def _edit_xml(out, edit):
    """Parse an EC2 XML answer, let edit(root, q) change it (q(tag) gives the
    namespaced tag), and re-serialise it with its default namespace kept."""
    root = ET.fromstring(out)
    ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""

    def q(tag):
        return f"{{{ns}}}{tag}" if ns else tag

    edit(root, q)
    text = ET.tostring(root, encoding="unicode", default_namespace=ns or None)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + text).encode("utf-8")


def _error_xml(code, message):
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error>{_xml('Code', code)}{_xml('Message', message)}"
        f"</Error></Errors>{_xml('RequestID', uuid.uuid4())}</Response>"
    ).encode("utf-8")


class PeerState:
    def __init__(self):
        self.lock = threading.Lock()
        # Serialises CreateFleet handling so that token caching is race free.
        self.fleet_lock = threading.Lock()
        self.calls = []
        self.unavailable = []  # list of (instance_type, zone|None, capacity_type|None)
        self.throttles = {}  # action -> remaining count
        self.tokens = {}  # client token -> (fingerprint, status, headers, body)
        # reservation id -> normalised reservation dict ("available" is live), in posted order
        self.reservations = {}
        # instance id -> {"reservation", "region", "capacity_block", "held"}
        self.reserved_instances = {}
        self.spot_prices = []  # [{"instance_type", "zone", "price", "timestamp"}]

    def reset(self):
        with self.fleet_lock, self.lock:
            self.calls.clear()
            self.unavailable = []
            self.throttles.clear()
            self.tokens.clear()
            self.reservations = {}
            self.reserved_instances = {}
            self.spot_prices = []

    def claim_reservation(self, reservation_id, instance_id, region):
        """Take one available instance of the reservation for instance_id."""
        with self.lock:
            res = self.reservations.get(reservation_id)
            if res is None or res["state"] != "active" or res["available"] <= 0:
                return False
            res["available"] -= 1
            self.reserved_instances[instance_id] = {
                "reservation": reservation_id,
                "region": region,
                "capacity_block": res["reservation_type"] == "capacity-block",
                "held": True,
            }
            return True

    def release_reservation(self, instance_id):
        """Give the instance's reservation its instance back (once)."""
        with self.lock:
            rec = self.reserved_instances.get(instance_id)
            if rec is None or not rec["held"]:
                return
            rec["held"] = False
            res = self.reservations.get(rec["reservation"])
            if res is not None:
                res["available"] = min(res["total"], res["available"] + 1)

    def record(self, action, status):
        with self.lock:
            self.calls.append({"action": action, "status": int(status)})

    def take_throttle(self, action):
        with self.lock:
            left = self.throttles.get(action, 0)
            if left <= 0:
                return False
            if left == 1:
                del self.throttles[action]
            else:
                self.throttles[action] = left - 1
            return True

    def is_unavailable(self, instance_type, zone, capacity_type):
        with self.lock:
            for it, z, ct in self.unavailable:
                if it != instance_type:
                    continue
                if z is not None and z != zone:
                    continue
                if ct is not None and ct != capacity_type:
                    continue
                return True
        return False


def _signing_service(environ):
    auth = environ.get("HTTP_AUTHORIZATION") or ""
    try:
        scope = auth.split(",")[0].split()[1]  # Credential=AKID/date/region/service/aws4_request
        _, _, region, service, _ = scope.split("/")
        return service.lower(), region
    except (IndexError, ValueError):
        return None, None


def _status_code(status):
    try:
        return int(str(status).split()[0])
    except (ValueError, IndexError):
        return 0


def _set_header(headers, name, value):
    out = [(k, v) for (k, v) in headers if k.lower() != name.lower()]
    out.append((name, value))
    return out


class PeerMiddleware:
    def __init__(self, app, account_id):
        self.app = app
        self.account_id = account_id
        self.state = PeerState()

    # ------------------------------------------------------------------ WSGI

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_peer/"):
            return self._control(environ, start_response, path[len("/_peer/") :])

        # EC2 is recognised by its SigV4 credential scope, exactly like moto's own
        # dispatcher does (unsigned requests would not reach moto's EC2 anyway).
        service, region = _signing_service(environ)
        if service != "ec2":
            return self.app(environ, start_response)

        body = self._read_body(environ)
        params = self._params(environ, body)
        action = params.get("Action", "")
        region = region or "us-east-1"
        try:
            return self._ec2(environ, start_response, body, params, action, region)
        except Exception:
            # moto bug / unimplemented corner: answer like EC2 would, keep the log honest.
            log(f"{action} crashed inside moto:\n{traceback.format_exc()}")
            self.state.record(action, 500)
            return self._respond(
                start_response,
                "500 Internal Server Error",
                _error_xml("InternalError", f"moto raised while handling {action}"),
                exc_info=sys.exc_info(),
            )

    def _ec2(self, environ, start_response, body, params, action, region):
        if self.state.take_throttle(action):
            self.state.record(action, 503)
            return self._respond(
                start_response,
                "503 Service Unavailable",
                _error_xml("RequestLimitExceeded", "Request limit exceeded."),
            )

        if action == "CreateFleet" and environ.get("REQUEST_METHOD") == "POST":
            status, headers, out = self._create_fleet(environ, body, region)
            self.state.record(action, _status_code(status))
            start_response(status, headers)
            return [out]

        # Served by the peer itself (moto has no capacity reservations; its spot
        # price history is a single placeholder price).
        served = None
        if action == "DescribeCapacityReservations":
            served = self._describe_capacity_reservations
        elif action == "DescribeSpotPriceHistory":
            with self.state.lock:
                if self.state.spot_prices:
                    served = self._describe_spot_price_history
        if served is not None:
            try:
                status, out = "200 OK", served(params, region)
            except _Ec2Error as e:
                status, out = "400 Bad Request", _error_xml(e.code, e.message)
            self.state.record(action, _status_code(status))
            return self._respond(start_response, status, out)

        if action in ("DescribeInstances", "TerminateInstances"):
            status, headers, out = self._call_moto(environ, body)
            if _status_code(status) == 200:
                if action == "DescribeInstances":
                    out = self._annotate_instances(out)
                    headers = _set_header(headers, "Content-Length", str(len(out)))
                else:
                    for instance_id in _indexed(params, "InstanceId"):
                        self.state.release_reservation(instance_id)
            self.state.record(action, _status_code(status))
            start_response(status, headers)
            return [out]

        def recording_start_response(status, headers, exc_info=None):
            self.state.record(action, _status_code(status))
            if exc_info is not None:
                return start_response(status, headers, exc_info)
            return start_response(status, headers)

        return self.app(environ, recording_start_response)

    # ----------------------------------------------------------- helpers

    @staticmethod
    def _read_body(environ):
        stream = environ.get("wsgi.input")
        body = b""
        if stream is not None:
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > 0:
                body = stream.read(length)
            elif environ.get("wsgi.input_terminated"):
                body = stream.read()
        PeerMiddleware._supply_body(environ, body)
        return body

    @staticmethod
    def _supply_body(environ, body):
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)

    @staticmethod
    def _params(environ, body):
        pairs = parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        ctype = environ.get("CONTENT_TYPE", "")
        if body and (not ctype or ctype.startswith("application/x-www-form-urlencoded")):
            pairs += parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        return dict(pairs)

    @staticmethod
    def _respond(start_response, status, body, content_type="text/xml;charset=UTF-8", exc_info=None):
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        if exc_info is not None:
            start_response(status, headers, exc_info)
        else:
            start_response(status, headers)
        return [body]

    def _call_moto(self, environ, body):
        self._supply_body(environ, body)
        captured = {}

        def sr(status, headers, exc_info=None):
            captured["status"] = status
            captured["headers"] = list(headers)
            return lambda data: captured.setdefault("early", []).append(data)

        result = self.app(environ, sr)
        try:
            chunks = list(captured.get("early", [])) + [c for c in result]
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return captured["status"], captured["headers"], b"".join(chunks)

    # -------------------------------------------------------- control API

    def _control(self, environ, start_response, name):
        method = environ.get("REQUEST_METHOD", "GET")
        raw = self._read_body(environ)
        try:
            payload = json.loads(raw.decode("utf-8")) if raw.strip() else {}
            return self._control_dispatch(start_response, method, name, payload)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            return self._json(start_response, "400 Bad Request", {"error": f"bad request: {e!r}"})

    def _control_dispatch(self, start_response, method, name, payload):
        st = self.state
        if name == "capacity" and method == "POST":
            entries = []
            for e in payload.get("unavailable", []):
                ct = e.get("capacity_type")
                if ct not in (None, "spot", "on-demand"):
                    return self._json(
                        start_response, "400 Bad Request", {"error": f"bad capacity_type {ct!r}"}
                    )
                entries.append((e["instance_type"], e.get("zone"), ct))
            with st.lock:
                st.unavailable = entries
            return self._json(start_response, "200 OK", {"ok": True, "unavailable": len(entries)})
        if name == "capacity" and method == "GET":
            with st.lock:
                out = [
                    {"instance_type": it, "zone": z, "capacity_type": ct}
                    for it, z, ct in st.unavailable
                ]
            return self._json(start_response, "200 OK", {"unavailable": out})
        if name == "throttle" and method == "POST":
            action, count = payload.get("action"), int(payload.get("count", 1))
            if not action:
                return self._json(start_response, "400 Bad Request", {"error": "missing action"})
            with st.lock:
                if count > 0:
                    st.throttles[action] = count
                else:
                    st.throttles.pop(action, None)
            return self._json(start_response, "200 OK", {"ok": True})
        if name == "ssm" and method == "POST":
            # moto refuses PutParameter under /aws/ and lacks the EKS and Bottlerocket public
            # parameters: they are written into its backend directly.
            inject_ssm_parameters(self.account_id, payload.get("region", "us-east-1"), payload["parameters"])
            return self._json(start_response, "200 OK", {"ok": True})
        if name == "capacity-reservations" and method == "POST":
            try:
                reservations = self._parse_reservations(payload)
            except ValueError as e:
                return self._json(start_response, "400 Bad Request", {"error": str(e)})
            with st.lock:
                st.reservations = {r["id"]: r for r in reservations}
                for rec in st.reserved_instances.values():
                    rec["held"] = False  # the posted "available" is authoritative
            return self._json(start_response, "200 OK", {"ok": True, "reservations": len(reservations)})
        if name == "capacity-reservations" and method == "GET":
            self._reconcile_reservations()
            with st.lock:
                holders = {}
                for iid, rec in st.reserved_instances.items():
                    if rec["held"]:
                        holders.setdefault(rec["reservation"], []).append(iid)
                out = [
                    dict(
                        r,
                        tags=dict(r["tags"]),
                        start_time=_iso(r["start_time"]),
                        end_time=_iso(r["end_time"]) if r["end_time"] else None,
                        instances=holders.get(r["id"], []),
                    )
                    for r in st.reservations.values()
                ]
            for r in out:
                r.pop("create_time", None)
            return self._json(start_response, "200 OK", {"reservations": out})
        if name == "spot-prices" and method == "POST":
            try:
                prices = self._parse_spot_prices(payload)
            except ValueError as e:
                return self._json(start_response, "400 Bad Request", {"error": str(e)})
            with st.lock:
                st.spot_prices = prices
            return self._json(start_response, "200 OK", {"ok": True, "prices": len(prices)})
        if name == "spot-prices" and method == "GET":
            with st.lock:
                out = [
                    {"instance_type": p["instance_type"], "zone": p["zone"], "price": p["price"]}
                    for p in st.spot_prices
                ]
            return self._json(start_response, "200 OK", {"prices": out})
        if name == "calls" and method == "GET":
            with st.lock:
                calls = list(st.calls)
            return self._json(start_response, "200 OK", calls)
        if name == "reset" and method == "POST":
            st.reset()
            from werkzeug.test import Client

            resp = Client(self.app).post("/moto-api/reset")
            if resp.status_code != 200:
                return self._json(
                    start_response, "500 Internal Server Error", {"error": resp.get_data(as_text=True)}
                )
            return self._json(start_response, "200 OK", {"ok": True})
        return self._json(start_response, "404 Not Found", {"error": f"no such control {method} {name}"})

    def _json(self, start_response, status, obj):
        return self._respond(start_response, status, json.dumps(obj).encode("utf-8"), "application/json")

    def _parse_reservations(self, payload):
        """Validated, normalised reservations from a POST; ValueError on bad input."""
        if not isinstance(payload, dict) or not isinstance(payload.get("reservations"), list):
            raise ValueError('expected {"reservations": [...]}')
        now = _now()
        out, seen = [], set()
        for i, e in enumerate(payload["reservations"]):
            where = f"reservations[{i}]"
            if not isinstance(e, dict):
                raise ValueError(f"{where}: expected an object")
            unknown = sorted(set(e) - _RESERVATION_KEYS)
            if unknown:
                raise ValueError(f"{where}: unknown keys {unknown}")
            for key in ("id", "instance_type", "zone"):
                if not isinstance(e.get(key), str) or not e[key]:
                    raise ValueError(f"{where}: {key} must be a non-empty string")
            rid = e["id"]
            if not _RESERVATION_ID_RE.match(rid):
                raise ValueError(f"{where}: id {rid!r} is not a capacity reservation id (cr-...)")
            if rid in seen:
                raise ValueError(f"{where}: duplicate id {rid}")
            seen.add(rid)
            total = e.get("total")
            if isinstance(total, bool) or not isinstance(total, int) or total < 0:
                raise ValueError(f"{where}: total must be an integer >= 0, got {total!r}")
            available = e.get("available", total)
            if (
                isinstance(available, bool)
                or not isinstance(available, int)
                or not 0 <= available <= total
            ):
                raise ValueError(f"{where}: available must be an integer in 0..total, got {available!r}")
            rtype = e.get("reservation_type", "default")
            if rtype not in RESERVATION_TYPES:
                raise ValueError(f"{where}: reservation_type must be one of {list(RESERVATION_TYPES)}")
            state = e.get("state", "active")
            if state not in RESERVATION_STATES:
                raise ValueError(f"{where}: state must be one of {list(RESERVATION_STATES)}")
            start = _parse_time(e["start_time"], f"{where}: start_time") if e.get("start_time") else now
            end = _parse_time(e["end_time"], f"{where}: end_time") if e.get("end_time") else None
            owner = e.get("owner_id") or self.account_id
            if not isinstance(owner, str):
                raise ValueError(f"{where}: owner_id must be a string")
            tags = e.get("tags") or {}
            if not isinstance(tags, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in tags.items()
            ):
                raise ValueError(f"{where}: tags must be an object of strings")
            out.append(
                {
                    "id": rid,
                    "instance_type": e["instance_type"],
                    "zone": e["zone"],
                    "total": total,
                    "available": available,
                    "reservation_type": rtype,
                    "state": state,
                    "start_time": start,
                    "end_time": end,
                    "owner_id": owner,
                    "tags": dict(tags),
                    "create_time": now,
                }
            )
        return out

    @staticmethod
    def _parse_spot_prices(payload):
        if not isinstance(payload, dict) or not isinstance(payload.get("prices"), list):
            raise ValueError('expected {"prices": [...]}')
        now = _now()
        out = []
        for i, e in enumerate(payload["prices"]):
            where = f"prices[{i}]"
            if not isinstance(e, dict):
                raise ValueError(f"{where}: expected an object")
            unknown = sorted(set(e) - _SPOT_KEYS)
            if unknown:
                raise ValueError(f"{where}: unknown keys {unknown}")
            for key in ("instance_type", "zone"):
                if not isinstance(e.get(key), str) or not e[key]:
                    raise ValueError(f"{where}: {key} must be a non-empty string")
            price = e.get("price")
            if isinstance(price, bool) or not isinstance(price, (str, int, float)):
                raise ValueError(f"{where}: price must be a decimal string or a number")
            try:
                ok = float(price) >= 0
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"{where}: price must be a decimal >= 0, got {price!r}")
            out.append(
                {
                    "instance_type": e["instance_type"],
                    "zone": e["zone"],
                    "price": price if isinstance(price, str) else repr(price),
                    "timestamp": now,
                }
            )
        return out

    # ------------------------------------------- reservations, spot prices

    def _zone_id(self, zone, region):
        try:
            z = self._ec2_backend(region).get_zone_by_name(zone)
            return z.zone_id if z is not None else None
        except Exception:
            return None

    def _reconcile_reservations(self):
        """Release reservations held by instances moto reports terminated or gone."""
        with self.state.lock:
            held = [(iid, rec["region"]) for iid, rec in self.state.reserved_instances.items() if rec["held"]]
        for iid, region in held:
            backend = self._ec2_backend(region)
            try:
                instance = backend.get_instance_by_id(iid)
                gone = instance is None or instance._state.name == "terminated"
            except Exception:
                continue
            if gone:
                self.state.release_reservation(iid)

    def _describe_capacity_reservations(self, params, region):
        self._reconcile_reservations()
        with self.state.lock:
            items = [
                dict(r, tags=dict(r["tags"]))
                for r in self.state.reservations.values()
                if _zone_in_region(r["zone"], region)
            ]
        ids = _indexed(params, "CapacityReservationId")
        if ids:
            known = {r["id"] for r in items}
            missing = [i for i in ids if i not in known]
            if missing:
                raise _Ec2Error(
                    "InvalidCapacityReservationId.NotFound",
                    f"The capacityReservation ID '{missing[0]}' does not exist",
                )
            items = [r for r in items if r["id"] in ids]
        fields = {
            "instance-type": "instance_type",
            "availability-zone": "zone",
            "state": "state",
            "owner-id": "owner_id",
            "reservation-type": "reservation_type",
        }
        for name, values in _filters(params):
            if name.startswith("tag:"):
                key = name[len("tag:") :]
                items = [r for r in items if _matches(r["tags"].get(key), values)]
            elif name == "tag-key":
                items = [r for r in items if any(_matches(k, values) for k in r["tags"])]
            elif name in fields:
                items = [r for r in items if _matches(r[fields[name]], values)]
            else:
                log(f"DescribeCapacityReservations: filter {name!r} not supported, ignored")
        page, next_token = _page(items, params)

        def item(r):
            parts = [
                _xml("capacityReservationId", r["id"]),
                _xml("ownerId", r["owner_id"]),
                _xml(
                    "capacityReservationArn",
                    f"arn:aws:ec2:{region}:{r['owner_id']}:capacity-reservation/{r['id']}",
                ),
                _xml("availabilityZone", r["zone"]),
            ]
            zone_id = self._zone_id(r["zone"], region)
            if zone_id:
                parts.append(_xml("availabilityZoneId", zone_id))
            parts += [
                _xml("instanceType", r["instance_type"]),
                _xml("instancePlatform", "Linux/UNIX"),
                _xml("tenancy", "default"),
                _xml("totalInstanceCount", r["total"]),
                _xml("availableInstanceCount", r["available"]),
                _xml("state", r["state"]),
                _xml("startDate", _iso(r["start_time"])),
            ]
            if r["end_time"]:
                parts.append(_xml("endDate", _iso(r["end_time"])))
            parts += [
                _xml("endDateType", "limited" if r["end_time"] else "unlimited"),
                _xml("instanceMatchCriteria", "targeted"),
                _xml("createDate", _iso(r["create_time"])),
                _xml("reservationType", r["reservation_type"]),
                "<tagSet>"
                + "".join(
                    f"<item>{_xml('key', k)}{_xml('value', v)}</item>" for k, v in r["tags"].items()
                )
                + "</tagSet>",
            ]
            return "<item>" + "".join(parts) + "</item>"

        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<DescribeCapacityReservationsResponse xmlns="{EC2_NS}">'
            f"{_xml('requestId', uuid.uuid4())}"
            f"<capacityReservationSet>{''.join(item(r) for r in page)}</capacityReservationSet>"
            f"{_xml('nextToken', next_token) if next_token else ''}"
            "</DescribeCapacityReservationsResponse>"
        ).encode("utf-8")

    def _describe_spot_price_history(self, params, region):
        with self.state.lock:
            items = [dict(p) for p in self.state.spot_prices if _zone_in_region(p["zone"], region)]
        types = _indexed(params, "InstanceType")
        if types:
            items = [p for p in items if p["instance_type"] in types]
        products = _indexed(params, "ProductDescription")
        if products and SPOT_PRODUCT not in products:
            items = []
        if params.get("AvailabilityZone"):
            items = [p for p in items if p["zone"] == params["AvailabilityZone"]]
        for name, values in _filters(params):
            if name == "instance-type":
                items = [p for p in items if _matches(p["instance_type"], values)]
            elif name == "availability-zone":
                items = [p for p in items if _matches(p["zone"], values)]
            elif name == "product-description":
                if not _matches(SPOT_PRODUCT, values):
                    items = []
            else:
                log(f"DescribeSpotPriceHistory: filter {name!r} not supported, ignored")
        page, next_token = _page(items, params)
        body = "".join(
            "<item>"
            f"{_xml('instanceType', p['instance_type'])}"
            f"{_xml('productDescription', SPOT_PRODUCT)}"
            f"{_xml('spotPrice', p['price'])}"
            f"{_xml('timestamp', _iso(p['timestamp']))}"
            f"{_xml('availabilityZone', p['zone'])}"
            "</item>"
            for p in page
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<DescribeSpotPriceHistoryResponse xmlns="{EC2_NS}">'
            f"{_xml('requestId', uuid.uuid4())}"
            f"<spotPriceHistorySet>{body}</spotPriceHistorySet>"
            f"{_xml('nextToken', next_token) if next_token else ''}"
            "</DescribeSpotPriceHistoryResponse>"
        ).encode("utf-8")

    def _annotate_instances(self, out):
        """capacityReservationId (+ instanceLifecycle for capacity blocks) on the
        instances of a DescribeInstances answer that were launched into a reservation."""
        with self.state.lock:
            reserved = {iid: dict(rec) for iid, rec in self.state.reserved_instances.items()}
        if not reserved:
            return out
        text = out.decode("utf-8", "replace")
        if not any(iid in text for iid in reserved):
            return out

        def edit(root, q):
            path = "/".join(q(t) for t in ("reservationSet", "item", "instancesSet", "item"))
            for inst in root.findall(path):
                id_el = inst.find(q("instanceId"))
                rec = reserved.get(id_el.text if id_el is not None else None)
                if rec is None:
                    continue
                for old in inst.findall(q("capacityReservationId")):
                    inst.remove(old)
                if rec["capacity_block"]:
                    for old in inst.findall(q("instanceLifecycle")):
                        inst.remove(old)
                pos = list(inst).index(id_el) + 1
                added = ET.Element(q("capacityReservationId"))
                added.text = rec["reservation"]
                added.tail = id_el.tail
                inst.insert(pos, added)
                if rec["capacity_block"]:
                    lifecycle = ET.Element(q("instanceLifecycle"))
                    lifecycle.text = "capacity-block"
                    lifecycle.tail = id_el.tail
                    inst.insert(pos + 1, lifecycle)

        try:
            return _edit_xml(out, edit)
        except ET.ParseError as e:
            log(f"DescribeInstances answer not annotated (unparsable XML: {e})")
            return out

    # -------------------------------------------------------- CreateFleet

    def _subnet_zone(self, subnet_id, region):
        from moto.ec2.models import ec2_backends

        # Preferred: the account/region the request is for; then anything that exists.
        try:
            return self._ec2_backend(region).get_subnet(subnet_id).availability_zone
        except Exception:
            pass
        for _acct, per_region in list(ec2_backends.items()):
            for _reg, backend in list(per_region.items()):
                try:
                    return backend.get_subnet(subnet_id).availability_zone
                except Exception:
                    continue
        return None

    def _ec2_backend(self, region):
        from moto.ec2.models import ec2_backends

        try:
            return ec2_backends[self.account_id][region]
        except Exception:
            return None

    def _resolve_spec(self, spec, region):
        """Launch template spec as EC2 echoes it: id always present, version resolved."""
        prefix = "LaunchTemplateSpecification."
        out = {k[len(prefix):]: v for k, v in spec.items() if k.startswith(prefix)}
        backend = self._ec2_backend(region)
        try:
            if out.get("LaunchTemplateId"):
                lt = backend.get_launch_template(out["LaunchTemplateId"])
            else:
                lt = backend.get_launch_template_by_name(out["LaunchTemplateName"])
            out["LaunchTemplateId"] = lt.id
            version = out.get("Version")
            if version in (None, "", "$Default"):
                out["Version"] = str(lt.default_version_number)
            elif version == "$Latest":
                out["Version"] = str(lt.latest_version_number)
        except Exception:
            pass  # unknown template: echo what was sent
        return out

    def _create_fleet(self, environ, body, region):
        pairs = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        fingerprint = tuple(sorted(pairs))
        params = dict(pairs)
        token = params.get("ClientToken")

        with self.state.fleet_lock:
            if token:
                with self.state.lock:
                    cached = self.state.tokens.get(token)
                if cached is not None:
                    fp, status, headers, out = cached
                    if fp != fingerprint:
                        body_out = _error_xml(
                            "IdempotentParameterMismatch",
                            "Arguments on this idempotent request are inconsistent with "
                            "arguments used in previous request(s).",
                        )
                        return (
                            "400 Bad Request",
                            [("Content-Type", "text/xml;charset=UTF-8"),
                             ("Content-Length", str(len(body_out)))],
                            body_out,
                        )
                    return status, headers, out

            status, headers, out = self._create_fleet_uncached(environ, pairs, params, region)
            if token and _status_code(status) == 200:
                with self.state.lock:
                    self.state.tokens[token] = (fingerprint, status, headers, out)
            return status, headers, out

    def _reservation_target(self, resolved_spec, region):
        """(reservation dict snapshot, template InstanceType) when the launch template
        version targets a capacity reservation the peer knows, else (None, type)."""
        try:
            backend = self._ec2_backend(region)
            lt = backend.get_launch_template(resolved_spec["LaunchTemplateId"])
            data = lt.get_version(resolved_spec.get("Version") or "$Default").data or {}
        except Exception:
            return None, None
        rid = (
            (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        ).get("CapacityReservationId")
        if not rid:
            return None, data.get("InstanceType")
        with self.state.lock:
            res = self.state.reservations.get(rid)
            res = dict(res) if res is not None else None
        if res is None:
            log(f"CreateFleet: launch template {lt.id} targets {rid}, unknown to the peer; not checked")
        return res, data.get("InstanceType")

    @staticmethod
    def _reservation_error(res, instance_type, zone, capacity_type):
        """(code, message) why this override cannot launch into res, or None."""
        rid = res["id"]
        if instance_type != res["instance_type"] or (zone and zone != res["zone"]):
            return (
                UNSUPPORTED_CODE,
                f"The capacity reservation {rid} is for {res['instance_type']} in {res['zone']}; "
                f"the request asks for {instance_type} in {zone or 'any zone'}.",
            )
        wanted = "capacity-block" if res["reservation_type"] == "capacity-block" else "on-demand"
        if capacity_type != wanted:
            return (
                UNSUPPORTED_CODE,
                f"The capacity reservation {rid} ({res['reservation_type']}) can only be used "
                f"with {wanted} capacity, not {capacity_type}.",
            )
        if res["state"] != "active":
            return (
                RESERVATION_EXCEEDED_CODE,
                f"Insufficient capacity in the capacity reservation {rid}: "
                f"it is {res['state']}, not active.",
            )
        if res["available"] <= 0:
            return (
                RESERVATION_EXCEEDED_CODE,
                f"Insufficient capacity in the capacity reservation {rid}.",
            )
        return None

    def _create_fleet_uncached(self, environ, pairs, params, region):
        capacity_type = params.get("TargetCapacitySpecification.DefaultTargetCapacityType") or "on-demand"
        self._reconcile_reservations()

        # Group the LaunchTemplateConfigs.M.* parameters.
        other = []  # non-config pairs, in order
        configs = {}  # M -> {"fields": [(rest, v)], "overrides": {N: [(field, v)]}}
        for k, v in pairs:
            m = _OVERRIDE_RE.match(k)
            if m:
                cfg = configs.setdefault(int(m.group(1)), {"fields": [], "overrides": {}})
                cfg["overrides"].setdefault(int(m.group(2)), []).append((m.group(3), v))
                continue
            m = _CONFIG_RE.match(k)
            if m:
                cfg = configs.setdefault(int(m.group(1)), {"fields": [], "overrides": {}})
                cfg["fields"].append((m.group(2), v))
                continue
            if k == "TargetCapacitySpecification.DefaultTargetCapacityType" and v == "capacity-block":
                v = "on-demand"  # moto launches nothing for capacity-block
            other.append((k, v))

        errors = []  # (resolved spec, override fields dict, zone, code, message)
        kept_configs = []  # (fields, [override field lists]); fully stripped configs dropped
        targets = {}  # launch template id -> {version: reservation id}, for the kept configs
        for m_idx in sorted(configs):
            cfg = configs[m_idx]
            spec = dict(cfg["fields"])
            resolved = self._resolve_spec(spec, region)
            res, template_type = self._reservation_target(resolved, region)
            if not cfg["overrides"]:
                failure = res and self._reservation_error(res, template_type, None, capacity_type)
                if failure:
                    errors.append((resolved, {}, None) + failure)
                else:
                    kept_configs.append((cfg["fields"], []))
                    if res:
                        targets.setdefault(resolved.get("LaunchTemplateId"), {})[
                            resolved.get("Version")
                        ] = res["id"]
                continue
            kept = []
            for n_idx in sorted(cfg["overrides"]):
                ov_fields = cfg["overrides"][n_idx]
                ov = dict(ov_fields)
                zone = ov.get("AvailabilityZone")
                if not zone and ov.get("SubnetId"):
                    zone = self._subnet_zone(ov["SubnetId"], region)
                if res:
                    # Reserved capacity: the reservation decides, /_peer/capacity does not.
                    failure = self._reservation_error(
                        res, ov.get("InstanceType") or template_type, zone, capacity_type
                    )
                    if failure:
                        errors.append((resolved, ov, zone) + failure)
                    else:
                        kept.append(ov_fields)
                elif ov.get("InstanceType") and self.state.is_unavailable(
                    ov["InstanceType"], zone, capacity_type
                ):
                    errors.append((resolved, ov, zone, ICE_CODE, None))
                else:
                    kept.append(ov_fields)
            if kept:
                kept_configs.append((cfg["fields"], kept))
                if res:
                    targets.setdefault(resolved.get("LaunchTemplateId"), {})[
                        resolved.get("Version")
                    ] = res["id"]

        # moto ignores Priority and launches the first override of the first config.
        # Order by Priority (stable; missing = last) so that "first" means the
        # highest-priority remaining override, also across several launch templates.
        def prio(ov_fields):
            try:
                return float(dict(ov_fields).get("Priority", "inf"))
            except ValueError:
                return float("inf")

        kept_configs = [(fields, sorted(ovs, key=prio)) for fields, ovs in kept_configs]
        kept_configs.sort(key=lambda c: min((prio(o) for o in c[1]), default=float("inf")))

        new_pairs = list(other)
        for new_m, (fields, overrides) in enumerate(kept_configs, start=1):
            new_pairs += [(f"LaunchTemplateConfigs.{new_m}.{f}", v) for f, v in fields]
            for new_n, ov_fields in enumerate(overrides, start=1):
                new_pairs += [
                    (f"LaunchTemplateConfigs.{new_m}.Overrides.{new_n}.{f}", v) for f, v in ov_fields
                ]

        if errors and not kept_configs:  # nothing left that moto could launch
            out = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                f'<CreateFleetResponse xmlns="{EC2_NS}">'
                f"{_xml('requestId', uuid.uuid4())}"
                f"{_xml('fleetId', f'fleet-{uuid.uuid4()}')}"
                f"{self._error_set(errors, capacity_type)}<fleetInstanceSet/></CreateFleetResponse>"
            ).encode("utf-8")
            return (
                "200 OK",
                [("Content-Type", "text/xml;charset=UTF-8"), ("Content-Length", str(len(out)))],
                out,
            )

        status, headers, out = self._call_moto(environ, urlencode(new_pairs).encode("utf-8"))
        if _status_code(status) != 200:
            return status, headers, out
        if targets:
            out, extra = self._claim_reservations(out, targets, region)
            errors += extra
        if errors:
            out = self._inject_errors(out, self._error_set(errors, capacity_type))
        return status, _set_header(headers, "Content-Length", str(len(out))), out

    def _claim_reservations(self, out, targets, region):
        """Book the instances moto launched from reservation-targeting configs against
        their reservation; instances the reservation cannot take are terminated again and
        dropped from the answer. Returns (answer, extra errorSet entries)."""
        overflow = []  # (spec, ov, zone, instance ids) per fleetInstanceSet item
        root = ET.fromstring(out)
        ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""

        def q(tag):
            return f"{{{ns}}}{tag}" if ns else tag

        fleet_set = root.find(q("fleetInstanceSet"))
        for item in list(fleet_set) if fleet_set is not None else []:
            lto = item.find(q("launchTemplateAndOverrides"))
            spec_el = lto.find(q("launchTemplateSpecification")) if lto is not None else None
            if spec_el is None:
                continue
            lt_id = spec_el.findtext(q("launchTemplateId"))
            version = spec_el.findtext(q("version"))
            by_version = targets.get(lt_id) or {}
            rid = by_version.get(version)
            if rid is None and len(by_version) == 1:  # moto omits the version when none was sent
                rid = next(iter(by_version.values()))
            if rid is None:
                continue
            dropped = []
            for id_el in item.findall(f"{q('instanceIds')}/{q('item')}"):
                if not self.state.claim_reservation(rid, id_el.text, region):
                    dropped.append(id_el.text)
            if dropped:
                ov_el = lto.find(q("overrides"))
                by_tag = {tag: field for field, tag in _OVERRIDE_FIELDS}
                ov = {}
                for child in list(ov_el) if ov_el is not None else []:
                    local = child.tag.split("}")[-1]
                    if local in by_tag:
                        ov[by_tag[local]] = child.text or ""
                zone = ov.get("AvailabilityZone")
                if not zone and ov.get("SubnetId"):
                    zone = self._subnet_zone(ov["SubnetId"], region)
                spec = {"LaunchTemplateId": lt_id, "Version": version}
                overflow.append((item, spec, ov, zone, rid, dropped))

        if not overflow:
            return out, []
        extra = []
        backend = self._ec2_backend(region)
        for item, spec, ov, zone, rid, dropped in overflow:
            try:
                backend.terminate_instances(dropped)
            except Exception as e:
                log(f"CreateFleet: could not terminate {dropped} beyond {rid}: {e!r}")
            ids_el = item.find(q("instanceIds"))
            for id_el in list(ids_el):
                if id_el.text in dropped:
                    ids_el.remove(id_el)
            if len(ids_el) == 0:
                fleet_set.remove(item)
            extra.append(
                (spec, ov, zone, RESERVATION_EXCEEDED_CODE,
                 f"Insufficient capacity in the capacity reservation {rid}.")
            )
        text = ET.tostring(root, encoding="unicode", default_namespace=ns or None)
        return ('<?xml version="1.0" encoding="UTF-8"?>\n' + text).encode("utf-8"), extra

    @staticmethod
    def _error_set(errors, capacity_type):
        """errorSet XML; errors are (spec, override, zone, code, message); a None
        message for InsufficientInstanceCapacity is EC2's usual wording."""
        items = []
        for spec, ov, zone, code, msg in errors:
            spec_xml = "".join(_xml(tag, spec[k]) for k, tag in _SPEC_FIELDS if spec.get(k))
            ov = dict(ov)
            if zone and "AvailabilityZone" not in ov:
                ov["AvailabilityZone"] = zone
            ov_xml = "".join(_xml(tag, ov[k]) for k, tag in _OVERRIDE_FIELDS if k in ov)
            if msg is None:
                where = f" in the Availability Zone you requested ({zone})" if zone else ""
                msg = (
                    f"We currently do not have sufficient {ov.get('InstanceType')} capacity{where}. "
                    "Our system will be working on provisioning additional capacity."
                )
            items.append(
                "<item><launchTemplateAndOverrides>"
                f"<launchTemplateSpecification>{spec_xml}</launchTemplateSpecification>"
                f"<overrides>{ov_xml}</overrides>"
                "</launchTemplateAndOverrides>"
                f"{_xml('lifecycle', capacity_type)}"
                f"{_xml('errorCode', code)}"
                f"{_xml('errorMessage', msg)}</item>"
            )
        return f"<errorSet>{''.join(items)}</errorSet>"

    @staticmethod
    def _inject_errors(out, error_set):
        text = out.decode("utf-8")
        # Drop any (empty) errorSet moto may have rendered, then add ours.
        text = re.sub(r"<errorSet\s*/>|<errorSet>\s*</errorSet>", "", text)
        if "<errorSet>" in text:
            text = text.replace("<errorSet>", error_set[: -len("</errorSet>")], 1)
        else:
            text = text.replace("</CreateFleetResponse>", error_set + "</CreateFleetResponse>", 1)
        return text.encode("utf-8")


def _watch_stdin():
    try:
        while sys.stdin.buffer.read1(65536):
            pass
    except Exception:
        pass
    os._exit(0)


def _warm_up(moto_app):
    for service in ("ec2", "sqs", "ssm", "iam"):
        environ = {
            "PATH_INFO": "/",
            "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=AKIDWARMUP/20240101/"
            f"us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0",
        }
        try:
            moto_app.get_application(environ)
        except Exception as e:  # never fatal; the first real request will retry
            log(f"warm-up of {service} failed: {e!r}")


def inject_ssm_parameters(account_id, region, parameters):
    """String parameters written straight into moto's SSM backend."""
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[account_id][region]
    for name, value in parameters.items():
        backend._parameters[name].append(
            Parameter(
                account_id=account_id,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=len(backend._parameters[name]) + 1,
                data_type="text",
            )
        )


def seed_network(port, cluster):
    """The network examples/aws selects, made through the peer's own EC2 API."""
    import boto3

    ec2 = boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    tag = [{"Key": "karpenter.sh/discovery", "Value": cluster}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    for i, zone in enumerate(["us-east-1a", "us-east-1b"]):
        ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"10.0.{i}.0/24",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tag}],
        )
    ec2.create_security_group(
        GroupName=f"{cluster}-nodes",
        Description="nodes",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tag}],
    )
    boto3.client(
        "iam",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).create_role(
        RoleName=f"KarpenterNodeRole-{cluster}",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "ec2.amazonaws.com"},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )
    for arch in ["x86_64", "arm64"]:
        images = ec2.describe_images(
            Owners=["amazon"], Filters=[{"Name": "architecture", "Values": [arch]}]
        )["Images"]
        ec2.create_tags(Resources=[images[0]["ImageId"]], Tags=tag)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--seed-network",
        metavar="CLUSTER",
        help="before printing PORT, create a VPC with a subnet in us-east-1a and us-east-1b, a "
        "security group, and tag one x86_64 and one arm64 AMI, all tagged "
        "karpenter.sh/discovery=CLUSTER, and the IAM role KarpenterNodeRole-CLUSTER (what "
        "examples/aws selects)",
    )
    parser.add_argument(
        "--keep-running",
        action="store_true",
        help="do not exit when stdin closes (for running it by hand in the background)",
    )
    args = parser.parse_args()

    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # moto occasionally print()s; keep stdout for the PORT line only

    if not args.keep_running:
        threading.Thread(target=_watch_stdin, name="stdin-eof", daemon=True).start()

    from werkzeug.serving import make_server
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )

    class QuietHandler(MotoRequestHandler):
        def log_request(self, *a, **kw):
            pass

        def log(self, type, message, *a):
            if type == "error":
                super().log(type, message, *a)

    moto_app = DomainDispatcherApplication(create_backend_app)
    account_id = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)
    app = PeerMiddleware(moto_app, account_id)
    server = make_server(args.host, args.port, app, threaded=True, request_handler=QuietHandler)

    if args.seed_network:
        serving = threading.Thread(target=server.serve_forever, name="serve", daemon=True)
        serving.start()
        seed_network(server.server_port, args.seed_network)
        real_stdout.write(f"PORT {server.server_port}\n")
        real_stdout.flush()
        serving.join()
        os._exit(0)
    real_stdout.write(f"PORT {server.server_port}\n")
    real_stdout.flush()
    # Building moto's EC2 app (and its us-east-1 backend) takes ~1.5 s; do it while
    # the test sets up its clients. Requests arriving meanwhile wait on moto's lock.
    threading.Thread(target=_warm_up, args=(moto_app,), name="warm-up", daemon=True).start()
    try:
        server.serve_forever()
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
