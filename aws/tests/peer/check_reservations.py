#!/usr/bin/env python3
"""Self-check of moto_peer.py's capacity reservations and spot prices.

Starts ``moto_peer.py --port 0``, talks to it with boto3 (us-east-1, dummy
credentials) and the JSON control endpoints, prints PASS/FAIL per check and exits
non-zero when any check fails.
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import boto3
from botocore.exceptions import ClientError

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = []


def check(name, cond, detail=""):
    RESULTS.append(bool(cond))
    print(f"{'PASS' if cond else 'FAIL'}: {name}" + ("" if cond else f" -- {detail}"), flush=True)


def control(port, method, name, payload=None):
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/_peer/{name}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def error_code(fn, **kw):
    try:
        fn(**kw)
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def fleet(ec2, lt, overrides, capacity_type="on-demand", total=1, token=None):
    kw = dict(
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": lt, "Version": "$Latest"},
                "Overrides": overrides,
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": total,
            "DefaultTargetCapacityType": capacity_type,
        },
    )
    if token:
        kw["ClientToken"] = token
    return ec2.create_fleet(**kw)


def instance_ids(resp):
    return [i for inst in resp.get("Instances", []) for i in inst.get("InstanceIds", [])]


def error_codes(resp):
    return [e.get("ErrorCode") for e in resp.get("Errors", [])]


def describe_instance(ec2, iid):
    return ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]


def available(ec2, rid):
    return ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0][
        "AvailableInstanceCount"
    ]


CR_DEFAULT = "cr-0123456789abcdef0"
CR_BLOCK = "cr-0fedcba9876543210"
RESERVATIONS = {
    "reservations": [
        {
            "id": CR_DEFAULT,
            "instance_type": "m5.large",
            "zone": "us-east-1a",
            "total": 2,
            "available": 1,
            "reservation_type": "default",
            "state": "active",
            "tags": {"team": "a", "env": "test"},
        },
        {
            "id": CR_BLOCK,
            "instance_type": "p4d.24xlarge",
            "zone": "us-east-1b",
            "total": 1,
            "available": 1,
            "reservation_type": "capacity-block",
            "state": "active",
            "end_time": "2026-12-31T00:00:00Z",
            "tags": {"team": "b"},
        },
    ]
}


def run(port):
    ec2 = boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )

    # ---------------------------------------------------------------- baseline
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    sub_a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZone="us-east-1a")[
        "Subnet"
    ]["SubnetId"]
    sub_b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1b")[
        "Subnet"
    ]["SubnetId"]
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    plain_lt = ec2.create_launch_template(LaunchTemplateName="plain", LaunchTemplateData={"ImageId": ami})[
        "LaunchTemplate"
    ]["LaunchTemplateId"]
    r = fleet(ec2, plain_lt, [{"InstanceType": "m5.large", "SubnetId": sub_a}])
    plain_ids = instance_ids(r)
    check("plain CreateFleet launches one instance", len(plain_ids) == 1 and not r.get("Errors"), r)
    inst = describe_instance(ec2, plain_ids[0]) if plain_ids else {}
    check(
        "plain DescribeInstances has no CapacityReservationId",
        inst.get("InstanceId") == (plain_ids or [None])[0] and "CapacityReservationId" not in inst,
        inst,
    )
    control(port, "POST", "capacity", {"unavailable": [{"instance_type": "c5.large", "zone": "us-east-1a"}]})
    r = fleet(ec2, plain_lt, [{"InstanceType": "c5.large", "SubnetId": sub_a}])
    check(
        "injected capacity still gives InsufficientInstanceCapacity",
        error_codes(r) == ["InsufficientInstanceCapacity"] and not instance_ids(r),
        r,
    )
    control(port, "POST", "capacity", {"unavailable": []})

    # -------------------------------------------------------- control validation
    bad = [
        {"reservations": [{"id": CR_DEFAULT, "instance_type": "m5.large", "zone": "us-east-1a"}]},
        {"reservations": [dict(RESERVATIONS["reservations"][0], available=3)]},
        {"reservations": [dict(RESERVATIONS["reservations"][0], reservation_type="odd")]},
        {"reservations": [dict(RESERVATIONS["reservations"][0], state="sleeping")]},
        {"reservations": [dict(RESERVATIONS["reservations"][0], id="res-1")]},
        {"reservations": [dict(RESERVATIONS["reservations"][0], colour="red")]},
        {"reservations": [dict(RESERVATIONS["reservations"][0], end_time="tomorrow")]},
        {"reservations": [RESERVATIONS["reservations"][0], RESERVATIONS["reservations"][0]]},
        {"nothing": []},
    ]
    statuses = [control(port, "POST", "capacity-reservations", b) for b in bad]
    check(
        "bad reservation payloads answer 400 with a message",
        all(st == 400 and body.get("error") for st, body in statuses),
        statuses,
    )
    st, body = control(port, "POST", "capacity-reservations", RESERVATIONS)
    check("POST /_peer/capacity-reservations", st == 200 and body.get("reservations") == 2, (st, body))
    st, body = control(port, "GET", "capacity-reservations")
    got = {r["id"]: r for r in body.get("reservations", [])}
    check(
        "GET /_peer/capacity-reservations",
        st == 200 and got.get(CR_DEFAULT, {}).get("available") == 1 and got.get(CR_BLOCK, {}).get("total") == 1,
        body,
    )

    # ------------------------------------------------ DescribeCapacityReservations
    all_res = ec2.describe_capacity_reservations()["CapacityReservations"]
    by_id = {r["CapacityReservationId"]: r for r in all_res}
    check("describe all returns both", set(by_id) == {CR_DEFAULT, CR_BLOCK}, all_res)
    d = by_id.get(CR_DEFAULT, {})
    check(
        "default reservation fields",
        d.get("InstanceType") == "m5.large"
        and d.get("AvailabilityZone") == "us-east-1a"
        and d.get("AvailabilityZoneId")
        and d.get("TotalInstanceCount") == 2
        and d.get("AvailableInstanceCount") == 1
        and d.get("State") == "active"
        and d.get("ReservationType") == "default"
        and d.get("EndDateType") == "unlimited"
        and "EndDate" not in d
        and d.get("InstanceMatchCriteria") == "targeted"
        and d.get("InstancePlatform") == "Linux/UNIX"
        and d.get("Tenancy") == "default"
        and d.get("OwnerId") == "123456789012"
        and d.get("CapacityReservationArn", "").endswith(f":capacity-reservation/{CR_DEFAULT}")
        and d.get("StartDate")
        and d.get("CreateDate")
        and {t["Key"]: t["Value"] for t in d.get("Tags", [])} == {"team": "a", "env": "test"},
        d,
    )
    b = by_id.get(CR_BLOCK, {})
    check(
        "capacity-block reservation fields",
        b.get("ReservationType") == "capacity-block"
        and b.get("EndDateType") == "limited"
        and b.get("EndDate") is not None
        and b.get("EndDate").year == 2026,
        b,
    )
    r = ec2.describe_capacity_reservations(CapacityReservationIds=[CR_BLOCK])["CapacityReservations"]
    check("describe by id", [x["CapacityReservationId"] for x in r] == [CR_BLOCK], r)
    code = error_code(ec2.describe_capacity_reservations, CapacityReservationIds=["cr-00000000000000000"])
    check("unknown id -> InvalidCapacityReservationId.NotFound", code == "InvalidCapacityReservationId.NotFound", code)

    def ids_for(filters):
        res = ec2.describe_capacity_reservations(Filters=filters)["CapacityReservations"]
        return sorted(x["CapacityReservationId"] for x in res)

    check("filter tag:team=b", ids_for([{"Name": "tag:team", "Values": ["b"]}]) == [CR_BLOCK])
    check("filter tag-key=env", ids_for([{"Name": "tag-key", "Values": ["env"]}]) == [CR_DEFAULT])
    check("filter instance-type", ids_for([{"Name": "instance-type", "Values": ["m5.large"]}]) == [CR_DEFAULT])
    check(
        "filter availability-zone + state",
        ids_for(
            [
                {"Name": "availability-zone", "Values": ["us-east-1b"]},
                {"Name": "state", "Values": ["active"]},
            ]
        )
        == [CR_BLOCK],
    )
    check(
        "filter reservation-type",
        ids_for([{"Name": "reservation-type", "Values": ["capacity-block"]}]) == [CR_BLOCK],
    )
    check("filter owner-id", ids_for([{"Name": "owner-id", "Values": ["123456789012"]}]) == sorted([CR_BLOCK, CR_DEFAULT]))
    check("unsupported filter ignored", len(ids_for([{"Name": "tenancy", "Values": ["dedicated"]}])) == 2)
    page1 = ec2.describe_capacity_reservations(MaxResults=1)
    page2 = ec2.describe_capacity_reservations(MaxResults=1, NextToken=page1.get("NextToken", ""))
    check(
        "pagination MaxResults/NextToken",
        len(page1["CapacityReservations"]) == 1
        and page1.get("NextToken")
        and len(page2["CapacityReservations"]) == 1
        and not page2.get("NextToken")
        and page1["CapacityReservations"][0]["CapacityReservationId"]
        != page2["CapacityReservations"][0]["CapacityReservationId"],
        (page1, page2),
    )
    pages = ec2.get_paginator("describe_capacity_reservations").paginate(PaginationConfig={"PageSize": 1})
    check("boto3 paginator", sum(len(p["CapacityReservations"]) for p in pages) == 2)
    calls = control(port, "GET", "calls")[1]
    dcr = [c["status"] for c in calls if c["action"] == "DescribeCapacityReservations"]
    check("call log records DescribeCapacityReservations 200 and 400", 200 in dcr and 400 in dcr, dcr)

    # ---------------------------------------------- CreateFleet into a reservation
    res_lt = ec2.create_launch_template(
        LaunchTemplateName="reserved",
        LaunchTemplateData={
            "ImageId": ami,
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": CR_DEFAULT}},
        },
    )["LaunchTemplate"]["LaunchTemplateId"]
    r = fleet(ec2, res_lt, [{"InstanceType": "m5.large", "SubnetId": sub_a}], token="tok-1")
    ids1 = instance_ids(r)
    check("reserved CreateFleet launches one instance", len(ids1) == 1 and not r.get("Errors"), r)
    inst = describe_instance(ec2, ids1[0]) if ids1 else {}
    check(
        "DescribeInstances shows CapacityReservationId",
        inst.get("CapacityReservationId") == CR_DEFAULT and "InstanceLifecycle" not in inst,
        inst,
    )
    check("available decremented to 0", available(ec2, CR_DEFAULT) == 0)
    st, body = control(port, "GET", "capacity-reservations")
    held = {r["id"]: r["instances"] for r in body["reservations"]}
    check("GET shows the holding instance", held.get(CR_DEFAULT) == ids1, body)
    replay = fleet(ec2, res_lt, [{"InstanceType": "m5.large", "SubnetId": sub_a}], token="tok-1")
    check(
        "same ClientToken replays without taking capacity again",
        instance_ids(replay) == ids1 and available(ec2, CR_DEFAULT) == 0,
        replay,
    )
    r = fleet(ec2, res_lt, [{"InstanceType": "m5.large", "SubnetId": sub_a}], token="tok-2")
    errs = r.get("Errors", [])
    check(
        "exhausted reservation -> ReservationCapacityExceeded, no instance",
        error_codes(r) == ["ReservationCapacityExceeded"]
        and not instance_ids(r)
        and CR_DEFAULT in errs[0].get("ErrorMessage", "")
        and errs[0].get("Lifecycle") == "on-demand"
        and errs[0]["LaunchTemplateAndOverrides"]["Overrides"].get("InstanceType") == "m5.large"
        and errs[0]["LaunchTemplateAndOverrides"]["LaunchTemplateSpecification"].get("LaunchTemplateId") == res_lt,
        r,
    )
    ec2.terminate_instances(InstanceIds=ids1)
    check("terminate gives the instance back (available 1)", available(ec2, CR_DEFAULT) == 1)
    ec2.terminate_instances(InstanceIds=ids1)
    check("terminating again does not count twice", available(ec2, CR_DEFAULT) == 1)
    inst = describe_instance(ec2, ids1[0])
    check("terminated instance keeps its CapacityReservationId", inst.get("CapacityReservationId") == CR_DEFAULT, inst)

    r = fleet(ec2, res_lt, [{"InstanceType": "m5.xlarge", "SubnetId": sub_a}])
    check(
        "mismatched instance type -> Unsupported",
        error_codes(r) == ["Unsupported"]
        and not instance_ids(r)
        and "m5.large in us-east-1a" in r["Errors"][0].get("ErrorMessage", ""),
        r,
    )
    r = fleet(ec2, res_lt, [{"InstanceType": "m5.large", "SubnetId": sub_b}])
    check("mismatched zone -> Unsupported", error_codes(r) == ["Unsupported"] and not instance_ids(r), r)
    r = fleet(
        ec2,
        res_lt,
        [{"InstanceType": "m5.xlarge", "SubnetId": sub_a}, {"InstanceType": "m5.large", "SubnetId": sub_a}],
    )
    ids2 = instance_ids(r)
    check(
        "mixed overrides: matching one launches, other reported Unsupported",
        len(ids2) == 1 and error_codes(r) == ["Unsupported"] and available(ec2, CR_DEFAULT) == 0,
        r,
    )
    ec2.terminate_instances(InstanceIds=ids2)
    r = fleet(ec2, res_lt, [{"InstanceType": "m5.large", "SubnetId": sub_a}], total=2)
    ids3 = instance_ids(r)
    check(
        "capacity 2 against 1 available: one instance + ReservationCapacityExceeded",
        len(ids3) == 1 and error_codes(r) == ["ReservationCapacityExceeded"] and available(ec2, CR_DEFAULT) == 0,
        r,
    )
    running = [
        i["InstanceId"]
        for rv in ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])[
            "Reservations"
        ]
        for i in rv["Instances"]
        if i.get("CapacityReservationId") == CR_DEFAULT
    ]
    check("the instance beyond the reservation was terminated", running == ids3, running)
    ec2.terminate_instances(InstanceIds=ids3)
    r = fleet(ec2, res_lt, [{"InstanceType": "m5.large", "SubnetId": sub_a}], capacity_type="spot")
    check("spot into a reservation -> Unsupported", error_codes(r) == ["Unsupported"] and not instance_ids(r), r)

    # -------------------------------------------------------------- capacity block
    block_lt = ec2.create_launch_template(
        LaunchTemplateName="block",
        LaunchTemplateData={
            "ImageId": ami,
            "InstanceMarketOptions": {"MarketType": "capacity-block"},
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": CR_BLOCK}},
        },
    )["LaunchTemplate"]["LaunchTemplateId"]
    r = fleet(ec2, block_lt, [{"InstanceType": "p4d.24xlarge", "SubnetId": sub_b}], capacity_type="capacity-block")
    ids4, block_fleet = instance_ids(r), r.get("FleetId")
    check("capacity-block CreateFleet launches one instance", len(ids4) == 1 and not r.get("Errors"), r)
    inst = describe_instance(ec2, ids4[0]) if ids4 else {}
    check(
        "capacity-block instance: CapacityReservationId + InstanceLifecycle capacity-block",
        inst.get("CapacityReservationId") == CR_BLOCK and inst.get("InstanceLifecycle") == "capacity-block",
        inst,
    )
    r = fleet(ec2, block_lt, [{"InstanceType": "p4d.24xlarge", "SubnetId": sub_b}], capacity_type="capacity-block")
    check(
        "exhausted capacity block -> ReservationCapacityExceeded (lifecycle capacity-block)",
        error_codes(r) == ["ReservationCapacityExceeded"]
        and r["Errors"][0].get("Lifecycle") == "capacity-block"
        and not instance_ids(r),
        r,
    )
    r = fleet(ec2, block_lt, [{"InstanceType": "p4d.24xlarge", "SubnetId": sub_b}], capacity_type="on-demand")
    check("capacity block with on-demand -> Unsupported", error_codes(r) == ["Unsupported"], r)
    ec2.delete_fleets(FleetIds=[block_fleet], TerminateInstances=True)
    check("DeleteFleets(TerminateInstances) gives the capacity block back", available(ec2, CR_BLOCK) == 1)
    ec2.terminate_instances(InstanceIds=ids4)
    check("terminate after DeleteFleets does not count twice", available(ec2, CR_BLOCK) == 1)

    # A plain describe with several instances, some reserved, some not.
    all_insts = [i for rv in ec2.describe_instances()["Reservations"] for i in rv["Instances"]]
    tagged = {i["InstanceId"]: i.get("CapacityReservationId") for i in all_insts}
    check(
        "DescribeInstances (all) annotates only reserved instances",
        tagged.get(plain_ids[0]) is None and tagged.get(ids1[0]) == CR_DEFAULT and tagged.get(ids4[0]) == CR_BLOCK,
        tagged,
    )

    expired = dict(RESERVATIONS["reservations"][0], state="expired", available=2)
    control(port, "POST", "capacity-reservations", {"reservations": [expired]})
    r = fleet(ec2, res_lt, [{"InstanceType": "m5.large", "SubnetId": sub_a}])
    check("inactive reservation -> ReservationCapacityExceeded", error_codes(r) == ["ReservationCapacityExceeded"], r)
    check(
        "re-POST replaced the set",
        [x["CapacityReservationId"] for x in ec2.describe_capacity_reservations()["CapacityReservations"]]
        == [CR_DEFAULT],
    )
    code = error_code(ec2.describe_capacity_reservations, CapacityReservationIds=[CR_BLOCK])
    check("removed reservation -> NotFound", code == "InvalidCapacityReservationId.NotFound", code)

    # ------------------------------------------------------------------ spot prices
    moto_default = ec2.describe_spot_price_history(InstanceTypes=["m5.large"])["SpotPriceHistory"]
    check("empty table forwards to moto", len(moto_default) > 0, moto_default)
    bad = [
        {"prices": [{"instance_type": "m5.large", "zone": "us-east-1a"}]},
        {"prices": [{"instance_type": "m5.large", "zone": "us-east-1a", "price": "cheap"}]},
        {"prices": [{"instance_type": "m5.large", "zone": "us-east-1a", "price": "1", "x": 1}]},
        {"price": []},
    ]
    statuses = [control(port, "POST", "spot-prices", b) for b in bad]
    check("bad spot payloads answer 400", all(st == 400 and body.get("error") for st, body in statuses), statuses)
    prices = {
        "prices": [
            {"instance_type": "m5.large", "zone": "us-east-1a", "price": "0.0312"},
            {"instance_type": "m5.large", "zone": "us-east-1b", "price": "0.0400"},
            {"instance_type": "c5.large", "zone": "us-east-1a", "price": "0.0250"},
            {"instance_type": "c5.large", "zone": "eu-west-1a", "price": "0.0199"},
        ]
    }
    st, body = control(port, "POST", "spot-prices", prices)
    check("POST /_peer/spot-prices", st == 200 and body.get("prices") == 4, body)

    def spot(**kw):
        return [
            (p["InstanceType"], p["AvailabilityZone"], p["SpotPrice"], p["ProductDescription"])
            for p in ec2.describe_spot_price_history(**kw)["SpotPriceHistory"]
        ]

    got = spot(InstanceTypes=["m5.large"])
    check(
        "spot prices by InstanceType",
        got
        == [
            ("m5.large", "us-east-1a", "0.0312", "Linux/UNIX"),
            ("m5.large", "us-east-1b", "0.0400", "Linux/UNIX"),
        ],
        got,
    )
    got = spot(Filters=[{"Name": "availability-zone", "Values": ["us-east-1a"]}])
    check("spot filter availability-zone (region-scoped)", sorted(g[0] for g in got) == ["c5.large", "m5.large"], got)
    got = spot(Filters=[{"Name": "instance-type", "Values": ["c5.*"]}])
    check("spot filter instance-type (wildcard)", got == [("c5.large", "us-east-1a", "0.0250", "Linux/UNIX")], got)
    got = spot(ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"])
    check("spot ProductDescriptions Linux/UNIX", len(got) == 3, got)
    got = spot(Filters=[{"Name": "product-description", "Values": ["Windows"]}])
    check("spot product-description Windows -> nothing", got == [], got)
    p1 = ec2.describe_spot_price_history(MaxResults=2)
    p2 = ec2.describe_spot_price_history(MaxResults=2, NextToken=p1.get("NextToken", ""))
    check(
        "spot pagination",
        len(p1["SpotPriceHistory"]) == 2 and p1.get("NextToken") and len(p2["SpotPriceHistory"]) == 1
        and not p2.get("NextToken"),
        (p1, p2),
    )
    ts = ec2.describe_spot_price_history(InstanceTypes=["m5.large"])["SpotPriceHistory"][0].get("Timestamp")
    check("spot timestamp parsed", ts is not None and ts.year >= 2024, ts)
    st, body = control(port, "GET", "spot-prices")
    check("GET /_peer/spot-prices", st == 200 and len(body.get("prices", [])) == 4, body)

    # ------------------------------------------------------------------------ reset
    st, _ = control(port, "POST", "reset")
    st1, body1 = control(port, "GET", "capacity-reservations")
    st2, body2 = control(port, "GET", "spot-prices")
    check(
        "reset clears reservations and spot prices",
        st == 200 and body1 == {"reservations": []} and body2 == {"prices": []},
        (body1, body2),
    )
    check("after reset DescribeCapacityReservations is empty", ec2.describe_capacity_reservations()["CapacityReservations"] == [])
    after = ec2.describe_spot_price_history(InstanceTypes=["m5.large"])["SpotPriceHistory"]
    check("after reset spot prices come from moto again", after and after[0]["SpotPrice"] != "0.0312", after[:1])


def main():
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "moto_peer.py"), "--port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        line = proc.stdout.readline().decode().strip()
        if not line.startswith("PORT "):
            print(f"FAIL: peer did not print PORT (got {line!r})")
            return 1
        port = int(line.split()[1])
        try:
            run(port)
        except Exception as e:  # a crash is a failed check, not a traceback-only exit
            import traceback

            traceback.print_exc()
            check("self-check ran to the end", False, repr(e))
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed or not RESULTS else 0


if __name__ == "__main__":
    sys.exit(main())
