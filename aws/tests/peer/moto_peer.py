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
  POST /_peer/reset     clears calls, capacity, throttles, the client-token
                        cache and moto's own state (/moto-api/reset).

Process contract: prints exactly one line ``PORT <n>`` to stdout once the
socket is bound, logs only to stderr, and exits as soon as stdin reaches EOF
(the spawning test holds the pipe).
"""

import argparse
import io
import json
import os
import re
import sys
import threading
import traceback
import uuid
from urllib.parse import parse_qsl, urlencode
from xml.sax.saxutils import escape

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"

ICE_CODE = "InsufficientInstanceCapacity"

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

    def reset(self):
        with self.fleet_lock, self.lock:
            self.calls.clear()
            self.unavailable = []
            self.throttles.clear()
            self.tokens.clear()

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
        action = self._params(environ, body).get("Action", "")
        region = region or "us-east-1"
        try:
            return self._ec2(environ, start_response, body, action, region)
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

    def _ec2(self, environ, start_response, body, action, region):
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

    def _create_fleet_uncached(self, environ, pairs, params, region):
        capacity_type = params.get("TargetCapacitySpecification.DefaultTargetCapacityType") or "on-demand"

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
            other.append((k, v))

        errors = []  # (config fields dict, override fields dict, zone)
        kept_configs = []  # (fields, [override field lists]); fully stripped configs dropped
        for m_idx in sorted(configs):
            cfg = configs[m_idx]
            spec = dict(cfg["fields"])
            if not cfg["overrides"]:
                kept_configs.append((cfg["fields"], []))
                continue
            kept = []
            for n_idx in sorted(cfg["overrides"]):
                ov_fields = cfg["overrides"][n_idx]
                ov = dict(ov_fields)
                zone = ov.get("AvailabilityZone")
                if not zone and ov.get("SubnetId"):
                    zone = self._subnet_zone(ov["SubnetId"], region)
                if ov.get("InstanceType") and self.state.is_unavailable(
                    ov["InstanceType"], zone, capacity_type
                ):
                    errors.append((self._resolve_spec(spec, region), ov, zone))
                else:
                    kept.append(ov_fields)
            if kept:
                kept_configs.append((cfg["fields"], kept))

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

        if not errors:
            return self._call_moto(environ, urlencode(new_pairs).encode("utf-8"))

        error_set = self._error_set(errors, capacity_type)

        if not kept_configs:  # nothing left that moto could launch
            out = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                f'<CreateFleetResponse xmlns="{EC2_NS}">'
                f"{_xml('requestId', uuid.uuid4())}"
                f"{_xml('fleetId', f'fleet-{uuid.uuid4()}')}"
                f"{error_set}<fleetInstanceSet/></CreateFleetResponse>"
            ).encode("utf-8")
            return (
                "200 OK",
                [("Content-Type", "text/xml;charset=UTF-8"), ("Content-Length", str(len(out)))],
                out,
            )

        status, headers, out = self._call_moto(environ, urlencode(new_pairs).encode("utf-8"))
        if _status_code(status) == 200:
            out = self._inject_errors(out, error_set)
            headers = _set_header(headers, "Content-Length", str(len(out)))
        return status, headers, out

    @staticmethod
    def _error_set(errors, capacity_type):
        items = []
        for spec, ov, zone in errors:
            spec_xml = "".join(_xml(tag, spec[k]) for k, tag in _SPEC_FIELDS if spec.get(k))
            ov = dict(ov)
            if zone and "AvailabilityZone" not in ov:
                ov["AvailabilityZone"] = zone
            ov_xml = "".join(_xml(tag, ov[k]) for k, tag in _OVERRIDE_FIELDS if k in ov)
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
                f"{_xml('errorCode', ICE_CODE)}"
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
