"""Scale-down through decommissioning: hand-offs, reads during them, kills, cancels, refusals."""
import argparse
import base64
import http.client
import json
import os
import random
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

from kube import *  # noqa: F401,F403
from tenant import *  # noqa: F401,F403


@scenario
def scale_down_pods_follow():
    """kubectl scale back to 1: the second pod goes, its volume stays (whenScaled: Retain)."""
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=1")
    wait_for("one pod left", lambda: len(tenant_pods()) == 1, 180, interval=2)
    wait_tenant_ready(timeout=180, replicas=1)
    if not kget("pvc", f"data-{TENANT}-1"):
        raise Fail(f"data-{TENANT}-1 was deleted on scale-down")
    return f"1 pod; PVC data-{TENANT}-1 kept"


@scenario
def grafana_queries_through_the_service():
    """InfluxQL as Grafana's data source sends it, through the Service (one pod now): the
    health check, template-variable queries and a query-builder panel see the points written
    at the start, exactly."""

    # The removed pod told the remaining one it left before it went, so reads through it do
    # not wait for the kubelet to refresh its peer file (about a minute).
    names = {v[0] for s in influxql("SHOW MEASUREMENTS") for v in s["values"]}
    if not {"lp", "mp"} <= names:
        raise Fail(f"SHOW MEASUREMENTS: {sorted(names)}")
    hosts = [v[1] for s in influxql('SHOW TAG VALUES FROM "lp" WITH KEY = "host"') for v in s["values"]]
    # `raw` is the host of the two points in policy `raw`: tag values are per database.
    if hosts != [f"h{i}" for i in range(10)] + ["raw"]:
        raise Fail(f"SHOW TAG VALUES: {hosts}")
    row = influxql('SELECT count("v"), sum("n") FROM "lp" WHERE time > now() - 1d')[0]["values"][0]
    if row[1:] != [1000, 499500]:
        raise Fail(f"count and sum of lp: {row}")
    per_host = influxql('SELECT count("v") FROM "lp" WHERE time > now() - 1d GROUP BY time(1h), "host" fill(none)')
    counts = {s["tags"]["host"]: sum(v[1] for v in s["values"]) for s in per_host}
    if counts != {f"h{i}": 100 for i in range(10)}:
        raise Fail(f"count per host: {counts}")
    return "SHOW MEASUREMENTS, SHOW TAG VALUES (11 hosts), count 1000 / sum 499500, 100 per host per GROUP BY time(1h), host"


@scenario
def three_replicas_read_as_one():
    """Scale to 3 replicas, write through the Service (spread over the pods), then read through
    the Service: /sql across the tenant and Grafana-shaped InfluxQL see every point exactly once,
    whichever pod answers; then back to 1 replica."""
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=3")
    wait_tenant_ready(timeout=300, replicas=3)
    w = Writer("spread", size=100, pause=0.01)
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 300, 120)
    w.stop()
    # The new pods told the running one they joined before they became ready (its peer file
    # lists them only once the kubelet refreshes it, about a minute later).
    verified = w.verify(timeout=60)
    # What each pod holds, read on the pod itself: the truth the reads across the tenant must add up to.
    per_pod = {}
    for p in tenant_pods():
        base = ACC.pod(p)
        per_pod[p["metadata"]["name"]] = (int(sql_rows(base, f"SELECT count() AS c FROM {w.table}")[0]["c"])
                                         if w.table in tables(base) else 0)
    total = sum(per_pod.values())
    if sum(1 for n in per_pod.values() if n) < 2:
        raise Fail(f"the writes through the Service did not spread over the pods: {per_pod}")

    def every_pod_reads_all():
        seen = {p["metadata"]["name"]: int(tenant_sql(f"SELECT count() AS c FROM {w.table}",
                                                       "SELECT sum(c) AS c FROM tenant", ACC.pod(p))[0]["c"])
                for p in tenant_pods()}
        if set(seen.values()) != {total}:
            raise Fail(f"reads through each pod: {seen}, want {total}")
        return seen
    # At once through every pod, the one that was running included: only the flush of the
    # last writes is waited for.
    wait_for("every pod to read the whole tenant", every_pod_reads_all, 20, interval=2)
    counts = count_by_batch(w.table)
    if sum(counts.values()) != total:
        raise Fail(f"a read across the tenant counts {sum(counts.values())}, the pods hold {total}: {per_pod}")
    for _ in range(6):  # the Service picks a pod per connection: several coordinators answer
        row = influxql('SELECT count("i"), sum("i") FROM "spread" WHERE time > now() - 1d')[0]["values"][0]
        # Every batch present is whole (verify() checked it): i runs 0..size-1 in each.
        want_sum = len(counts) * w.size * (w.size - 1) // 2
        if row[1:] != [total, want_sum]:
            raise Fail(f"InfluxQL count and sum through the Service: {row[1:]}, want {[total, want_sum]}")
        per = influxql('SELECT count("i") FROM "spread" WHERE time > now() - 1d GROUP BY time(1h), "w" fill(none)')
        if sum(v[1] for s in per for v in s["values"]) != total:
            raise Fail(f"per-bucket counts do not add up to {total}: {per}")
        # A subquery: every pod counts its share per writer, the picking pod sums the counts.
        sub = influxql('SELECT sum("c") FROM (SELECT count("i") AS "c" FROM "spread" WHERE time > now() - 1d GROUP BY "w")')
        if sub[0]["values"][0][1] != total:
            raise Fail(f"sum of per-writer counts through a subquery: {sub}, want {total}")
    names = {v[0] for s in influxql("SHOW MEASUREMENTS") for v in s["values"]}
    if "spread" not in names:
        raise Fail(f"SHOW MEASUREMENTS: {sorted(names)}")
    shrunk = shrink_to_one(total, "three")
    return (f"{verified}; spread over the pods as {per_pod}; InfluxQL count {total} through the "
            f"Service six times, and as a sum of per-writer counts in a subquery; {shrunk}")


def shrink_to_one(total, tag):
    """Scales the tenant to 1 under writers: the leaving pods hand their data to pod 0, one at a
    time, before the StatefulSet shrinks. Meanwhile every InfluxQL count through the Service is
    exact and none fails (each leaving pod tells the others it left before it goes); after
    it, every acknowledged point is there exactly once, and pod 0 holds all of `spread`."""
    before = decommissioned_events()
    w = Writer(f"shrink{tag}", size=100, pause=0.01)
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 100, 120)
    started = time.time()
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=1")
    exact, failed, errors = 0, 0, []
    deadline = time.time() + 600
    while len(tenant_pods()) > 1:
        if time.time() > deadline:
            raise Fail(f"still {len(tenant_pods())} pods after 600 s: {kj('-n', NS, 'get', 'ingesttenant', TENANT).get('status', {}).get('decommission')}")
        try:
            n = influxql_count("spread")
        except (Fail, OSError, http.client.HTTPException) as e:
            failed += 1
            errors.append(f"{time.time() - started:.0f} s: {e}")
        else:
            if n != total:
                raise Fail(f"InfluxQL count of spread during the scale-down: {n}, want {total}")
            exact += 1
        time.sleep(1)
    took = time.time() - started
    if failed:
        raise Fail(f"{failed} of {exact + failed} InfluxQL counts through the Service failed during the "
                   f"scale-down: {errors[:3]}")
    wait_tenant_ready(timeout=180, replicas=1)
    w.stop()
    verified = w.verify(timeout=240)
    pod0 = ACC.pod(tenant_pods()[0])
    held = int(sql_rows(pod0, f"SELECT count() AS c FROM {DB}_autogen_spread")[0]["c"])
    if held != total:
        raise Fail(f"pod 0 holds {held} points of spread after the scale-down, want {total}")
    events = decommissioned_events() - before
    if events < 2:
        raise Fail(f"{events} new Decommissioned events, want one per leaving pod")
    return (f"scaled 3 -> 1 in {took:.0f} s under writers ({verified}); {exact} InfluxQL counts "
            f"during it exact, none failed; pod 0 holds all {total}")


@scenario
def scale_up_after_scale_down_brings_nothing_back():
    """Back to 3 replicas: the pods return on the volumes they emptied, take writes again (the
    operator cancels their finished decommission), hold none of the data they handed over, and a
    read through the Service still counts every point once; then back to 1."""
    total = influxql_count("spread")
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=3")
    wait_tenant_ready(timeout=300, replicas=3)
    for p in tenant_pods()[1:]:
        held = [t for t in tables(ACC.pod(p)) if t.endswith("_spread") or "_shrink" in t]
        if held:
            raise Fail(f"{p['metadata']['name']} came back holding {held}")
    seen = wait_for("every point once through the Service", lambda: (
        influxql_count("spread") == total or None) and total, 150, interval=3)
    shrunk = shrink_to_one(total, "again")
    return f"pods 1 and 2 came back empty; count {seen} unchanged; {shrunk}"


def decommission_status():
    return (kget("ingesttenant", TENANT) or {}).get("status", {}).get("decommission")


def write_bulk(measurement, requests, points):
    """`requests` bodies of `points` unique points each through the Service; returns how many
    points were acknowledged (a body answered otherwise is sent again until it is)."""
    t0 = (int(time.time()) - 1800) * 10**9
    acked = 0
    for r in range(requests):
        body = "\n".join(f"{measurement},h=h{j % 100} i={j}i {t0 + r * points + j}" for j in range(points))
        wait_for(f"bulk request {r}", lambda: write(ACC.service(), body)[0] == 204, 120, interval=1)
        acked += points
    return acked


@scenario
def scale_down_survives_kills():
    """3 -> 1 again, with the leaving pod SIGKILLed, then the receiving pod SIGKILLed, then the
    operator's pods deleted, each while a pod hands its data over: every acknowledged point is read
    back exactly once through the Service, and nothing twice."""
    total = influxql_count("spread")
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=3")
    wait_tenant_ready(timeout=300, replicas=3)
    # Enough rows that a hand-off takes a few seconds (a bulk request may be sent twice when its
    # answer is lost: the count below allows for that only through the Writer's in-doubt rule).
    bulk = write_bulk("bulk", 45, 20000)
    w = Writer("killing", size=100, pause=0.01)
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 50, 120)
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=1")
    done = []

    def leaving(ordinal, or_later=False):
        """The decommission status while pod `ordinal` hands over (with `or_later`, or a pod
        after it: pods leave from the highest ordinal down)."""
        d = decommission_status()
        if not d or d.get("phase") in ("none", "empty"):
            return None
        o = d.get("ordinal")
        return d if o == ordinal or (or_later and isinstance(o, int) and o < ordinal) else None

    def kill_while_leaving(ordinal, victim, what):
        """SIGKILLs pod `victim` while pod `ordinal` hands over; None when that hand-off ended
        before the kill, seen or not (a small one takes well under a second: on 2026-11-27
        pod 2's 200,000 points went over between two looks at the status, and the scenario
        waited 300 s for a hand-off that was over)."""
        d = wait_for(f"pod {ordinal} handing over", lambda: leaving(ordinal, or_later=True), 300,
                     interval=0.2)
        if d.get("ordinal") != ordinal:
            return None
        pods = {p["metadata"]["name"]: p for p in tenant_pods()}
        how = kill_pod(pods[f"{TENANT}-{victim}"], running_only=True)
        return how and f"{what} {how} in phase {d['phase']}"

    killed = kill_while_leaving(2, 2, "pod 2")
    done.append(killed or "pod 2 ended its hand-off before the kill")
    # The receiver dies during pod 2's resumed hand-off, or pod 1's when pod 2's had ended.
    receiver = (kill_while_leaving(2, 0, "receiver pod 0") if killed else None) or \
        kill_while_leaving(1, 0, "receiver pod 0 (pod 1 leaving)")
    if not receiver:
        raise Fail(f"no kill landed during a hand-off: {done}")
    done.append(receiver)
    # Pod 1's hand-off may be over before a look sees it: the operator's pods go then.
    d = wait_for("pod 1 handing over (or over)", lambda: leaving(1) or (
        None if len(tenant_pods()) > 1 else {"phase": "over"}), 300, interval=0.2)
    k("-n", OP_NS, "delete", "pod", "-l", "app.kubernetes.io/name=sluice-operator", "--wait=false")
    done.append(f"operator pods deleted while pod 1 was in phase {d['phase']}")
    wait_for("one pod left", lambda: len(tenant_pods()) == 1, 600, interval=2)
    wait_tenant_ready(timeout=240, replicas=1)
    w.stop()
    verified = w.verify(timeout=240, allow_refused=True)
    got = wait_for("every point once through the Service", lambda: (
        (influxql_count("spread"), influxql_count("bulk")) == (total, bulk) or None) and True, 180, interval=3)
    return f"{'; '.join(done)}; {verified}; spread {total} and bulk {bulk} exact ({got})"


def influxql_counts(regex):
    """{measurement: count of field i} over every measurement matching `regex`, through the
    Service (fan-out)."""
    return {sr["name"]: sr["values"][0][1]
            for sr in influxql(f'SELECT count("i") FROM /{regex}/ WHERE time > now() - 1d')}


def cluster_token(name=TENANT):
    """The token the tenant's pods and its operator use between themselves."""
    return base64.b64decode(kj("-n", NS, "get", "secret", f"{name}-cluster")["data"]["token"]).decode().strip()


def pod_decommission(base, token):
    """The pod's own decommission status (`GET /decommission`, with the cluster token)."""
    st, body = req("GET", base, "/decommission", headers={"Authorization": f"Bearer {token}"})
    if st != 200:
        raise Fail(f"GET /decommission: {st} {body[:200]!r}")
    return json.loads(body)


def exact_counts(regex, want):
    """True when the counts through the Service are `want`; else Fail naming what differs."""
    got = influxql_counts(regex)
    if got == want:
        return True
    diff = {m: (got.get(m), n) for m, n in want.items() if got.get(m) != n}
    diff.update({m: (n, None) for m, n in got.items() if m not in want})
    raise Fail(f"{sum(got.values())} points, want {sum(want.values())}; {len(diff)} measurements differ "
               f"(got, want): {dict(list(diff.items())[:6])}")


@scenario
def scale_up_cancels_a_decommission():
    """2 -> 1, and back to 2 while pod 1 hands its data over: the operator cancels the
    decommission, pod 1 (the same pod, never removed) takes writes again with what it still
    holds, and every point is read once through the Service; then 2 -> 1 to the end, which hands
    over what the cancelled attempt left."""
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=2")
    wait_tenant_ready(timeout=300, replicas=2)
    # Many tables, each copied, counted and verified in turn, so the hand-off lasts seconds.
    # Half of the requests to each pod, so that both hold every table.
    n_tables, per_request, t0 = 120, 250, (int(time.time()) - 1800) * 10**9
    pods = tenant_pods()
    for r in range(8):
        body = "\n".join(f"cancel{m:03d},h=h{j % 10} i={j}i {t0 + r * per_request + j}"
                         for m in range(n_tables) for j in range(per_request))
        wait_for(f"bulk request {r}", lambda: write(ACC.pod(pods[r % 2]), body)[0] == 204, 120, interval=1)
    want = {f"cancel{m:03d}": 8 * per_request for m in range(n_tables)}
    wait_for("the tables through the Service", lambda: exact_counts("^cancel[0-9]", want), 120, interval=2)
    pod1 = tenant_pods()[1]
    uid1 = pod1["metadata"]["uid"]
    cancels = decommissioned_events("DecommissionCancelled")
    w = Writer("cancelled", size=100, pause=0.01)
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 50, 120)
    # Raised again as soon as pod 1 itself says it leaves (the operator's status follows only
    # every few seconds, by when a small hand-off may be over).
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=1")
    base1, token = ACC.pod(pod1), cluster_token()
    phase = wait_for("pod 1 leaving", lambda: (lambda p: p if p not in ("none", "empty") else None)(
        pod_decommission(base1, token)["phase"]), 180, interval=0.1)
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=2")
    wait_for("a DecommissionCancelled Event", lambda: decommissioned_events("DecommissionCancelled") > cancels,
             120, interval=1)
    wait_tenant_ready(timeout=180, replicas=2)
    if decommission_status():
        raise Fail(f"status.decommission after the cancel: {decommission_status()}")
    now1 = [p for p in tenant_pods() if p["metadata"]["name"] == f"{TENANT}-1"]
    if not now1 or now1[0]["metadata"]["uid"] != uid1:
        raise Fail("pod 1 was removed: the StatefulSet shrank although the decommission was cancelled")
    kept = [t for t in tables(ACC.pod(now1[0])) if re.search(r"_cancel[0-9]", t)]
    if not kept:
        raise Fail("pod 1 holds none of its tables: the hand-off finished before the cancel, so nothing was cancelled")
    n0 = len(w.acked)
    wait_for("writes after the cancel", lambda: len(w.acked) >= n0 + 50, 120)
    counts = wait_for("every point once through the Service", lambda: exact_counts("^cancel[0-9]", want), 120, interval=2)
    # Then down to 1 for good: what the cancelled hand-off left on pod 1 goes over too, and
    # with `scaleDownPolicy: Delete` the emptied pod's volume goes with it.
    patch_tenant({"spec": {"storage": {"scaleDownPolicy": "Delete"}}})
    wait_for("whenScaled Delete on the StatefulSet", lambda: (kget("statefulset", TENANT) or {}).get("spec", {}).get(
        "persistentVolumeClaimRetentionPolicy", {}).get("whenScaled") == "Delete", 60, interval=1)
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=1")
    wait_for("one pod left", lambda: len(tenant_pods()) == 1, 600, interval=2)
    wait_tenant_ready(timeout=240, replicas=1)
    claims = lambda: sorted(p["metadata"]["name"] for p in kj("-n", NS, "get", "pvc")["items"]
                            if p["metadata"]["name"].startswith(f"data-{TENANT}-"))
    # (Volumes of higher ordinals that earlier scenarios retained stay; only pod 1's goes.)
    wait_for("pod 1's volume deleted", lambda: f"data-{TENANT}-1" not in claims()
             and f"data-{TENANT}-0" in claims(), 120, interval=2)
    patch_tenant({"spec": {"storage": {"scaleDownPolicy": "Retain"}}})
    w.stop()
    verified = w.verify(timeout=240, allow_refused=True)
    exact_counts("^cancel[0-9]", want)
    return (f"cancelled in phase {phase}; pod 1 kept "
            f"{len(kept)} of {n_tables} tables and took writes again; counts exact ({counts}); then "
            f"2 -> 1 handed the rest and deleted pod 1's volume (scaleDownPolicy Delete): {verified}")


@scenario
def scale_down_refused_when_a_field_type_differs():
    """A field written as a number to one pod and as a string to the other: the leaving pod cannot
    hand that table over. The scale-down stops with the tenant's Degraded condition
    (DecommissionRefused) naming the field, the StatefulSet keeps both pods, nothing is lost,
    and raising the replicas again returns the pod to service. A second tenant, deleted after."""
    name = "clash"
    manifest = tenant_manifest(replicas=2, scaling={"minReplicas": 1, "maxReplicas": 2},
                               storage={"size": "1Gi", "reclaimPolicy": "Delete",
                                        **({"storageClassName": STORAGE_CLASS} if STORAGE_CLASS else {})})
    manifest["metadata"]["name"] = name
    apply(manifest)
    try:
        def ready(n):
            st = (kget("ingesttenant", name) or {}).get("status", {})
            pods = tenant_pods(name)
            return st.get("readyReplicas") == n and len(pods) == n and all(pod_ready(p) for p in pods)
        wait_for(f"tenant {name} Ready", lambda: ready(2), 300, interval=2)
        p0, p1 = tenant_pods(name)
        uid1 = p1["metadata"]["uid"]
        ts = (int(time.time()) - 600) * 10**9
        for pod, value in ((p0, "1.5"), (p1, '"text"')):
            st, ans = write(ACC.pod(pod), f"clash,h=a v={value} {ts}\nfine,h=a i=1i {ts}")
            if st != 204:
                raise Fail(f"write to {pod['metadata']['name']}: {st} {ans[:200]!r}")
        k("-n", NS, "scale", "ingesttenant", name, "--replicas=1")

        def refused():
            t = kget("ingesttenant", name) or {}
            c = {c["type"]: c for c in t.get("status", {}).get("conditions", [])}.get("Degraded", {})
            return c if c.get("status") == "True" and c.get("reason") == "DecommissionRefused" else None
        cond = wait_for("the Degraded condition (DecommissionRefused)", refused, 180, interval=1)
        if "v" not in cond.get("message", "") or "another type" not in cond.get("message", ""):
            raise Fail(f"the condition does not name the field: {cond.get('message')!r}")
        wait_for("a DecommissionRefused Event", lambda: decommissioned_events("DecommissionRefused", name) > 0,
                 60, interval=1)
        time.sleep(10)  # several reconciles: the set must keep pod 1
        sts = kget("statefulset", name) or {}
        now1 = [p for p in tenant_pods(name) if p["metadata"]["name"] == f"{name}-1"]
        if sts.get("spec", {}).get("replicas") != 2 or not now1 or now1[0]["metadata"]["uid"] != uid1:
            raise Fail(f"the StatefulSet shrank although pod 1 could not hand its data over")
        k("-n", NS, "scale", "ingesttenant", name, "--replicas=2")
        wait_for(f"tenant {name} Ready again", lambda: ready(2) and not refused(), 180, interval=2)
        # The condition clears on the tenant as soon as the replicas are raised; the pod hears
        # of the cancel on the operator's next pass (and its readiness may never have dropped).
        last = [None]

        def takes_writes():
            last[0] = write(ACC.pod(now1[0]), f"fine,h=a i=2i {ts + 1}")
            return last[0][0] == 204
        try:
            wait_for("pod 1 taking writes after the cancel", takes_writes, 60, interval=2)
        except Fail as e:
            if last[0] is None:
                raise
            st, ans = last[0]
            raise Fail(f"pod 1 after the cancel: {st} {ans[:200]!r}") from e
        return f"refused: {cond['message'][:200]}; both pods kept, pod 1 takes writes again"
    finally:
        k("-n", NS, "delete", "ingesttenant", name, "--wait=true", "--timeout=180s", check=False)
