"""Changes that roll or scale the pods: scale up, pool change, databases and policies, retention, the operator restarted."""
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
def scale_up_pods_follow():
    """kubectl scale ingesttenant --replicas=2: the StatefulSet and pods follow."""
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=2")
    wait_tenant_ready(timeout=300, replicas=2)
    sts = kget("statefulset", TENANT)
    sel = (kget("ingesttenant", TENANT).get("status") or {}).get("selector")
    if sts["spec"]["replicas"] != 2 or not sel:
        raise Fail(f"StatefulSet replicas {sts['spec']['replicas']}, /scale selector {sel!r}")
    return f"2/2 pods ready ({', '.join(p['metadata']['name'] for p in tenant_pods())})"


@scenario
def pool_change_rolls_without_loss():
    """Change the pool size under load: new config hash, pods replaced one by one, nothing lost."""
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in tenant_pods()}
    cm_before = kget("configmap", f"{TENANT}-config")["data"]["sluice.toml"]
    w = Writer("rolled")
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 20, 60)
    patch_tenant({"spec": {"pool": {"connections": 2, "flushWorkers": 2}}})
    least_ready = [len(before)]

    def replaced():
        pods = tenant_pods()
        least_ready[0] = min(least_ready[0], sum(1 for p in pods if pod_ready(p)))
        return len(pods) == len(before) and all(
            p["metadata"]["name"] in before and p["metadata"]["uid"] != before[p["metadata"]["name"]] for p in pods)
    wait_for("every pod replaced", replaced, 360, interval=0.5)
    if least_ready[0] < 1:
        raise Fail("every pod was down at once during the rollout")
    wait_tenant_ready(timeout=300)
    n0 = len(w.acked)
    wait_for("writes after the rollout", lambda: len(w.acked) >= n0 + 20, 120)
    w.stop()
    cm = kget("configmap", f"{TENANT}-config")["data"]["sluice.toml"]
    if cm == cm_before or "flush_workers = 2" not in cm:
        raise Fail(f"config not updated: {cm}")
    return f"config hash changed, pods replaced one at a time (>= {least_ready[0]} ready throughout); " + w.verify(allow_refused=True)


@scenario
def add_database_and_retention_policy():
    """Add a database (with two policies) and a policy to the existing one: their tables appear."""
    svc = ACC.service()
    st, _ = write(svc, "cpu v=1", db="metrics")
    if st != 404:
        raise Fail(f"write to the not-yet-declared database answered {st}")
    t = kget("ingesttenant", TENANT)
    dbs = t["spec"]["databases"]
    dbs[0]["retentionPolicies"].append({"name": "week", "duration": "1w"})
    dbs.append({"name": "metrics", "retentionPolicies": [
        {"name": "autogen", "duration": "90d", "default": True}, {"name": "short", "duration": "1d"}]})
    patch_tenant({"spec": {"databases": dbs}})
    wait_for("the rollout to start", lambda: (kget("statefulset", TENANT)["status"].get("updateRevision")
                                              != kget("statefulset", TENANT)["status"].get("currentRevision")) or
             "metrics" in kget("configmap", f"{TENANT}-config")["data"]["sluice.toml"], 60)
    wait_tenant_ready(timeout=360)
    written = {}
    for p in tenant_pods():  # each pod must know the new policies
        base = ACC.pod(p)
        for db, rp in (("metrics", None), ("metrics", "short"), (DB, "week")):
            st, body = write(base, f"cpu,pod={p['metadata']['name']} v=1", db=db, rp=rp)
            if st != 204:
                raise Fail(f"{p['metadata']['name']}: write to {db}/{rp} answered {st}: {body!r}")
            written[p["metadata"]["name"]] = base
    want = {"metrics_autogen_cpu", "metrics_short_cpu", f"{DB}_week_cpu"}
    for name, base in written.items():
        wait_for(f"tables on {name}", lambda: want <= tables(base) or None, 60)

        def policies():
            st, body = req("GET", base, "/query?q=" + urllib.parse.quote("SHOW RETENTION POLICIES ON metrics"))
            res = json.loads(body)["results"][0] if st == 200 else {}
            names = [v[0] for s in res.get("series", []) for v in s["values"]]
            if st != 200 or sorted(names) != ["autogen", "short"]:
                raise Fail(f"SHOW RETENTION POLICIES ON metrics: {st} {body[:300]!r}")
            return names
        # The rollout gave both pods new addresses: a pod reaches the other by name once the
        # cluster DNS has forgotten the old one (CoreDNS caches up to 30 s).
        wait_for(f"SHOW RETENTION POLICIES through {name}", policies, 90, interval=2)
    return f"tables {sorted(want)} on {len(written)} pods; SHOW RETENTION POLICIES lists autogen, short"


@scenario
def retention_edit_changes_ttl():
    """Shorten a policy in the tenant: every pod's existing table gets the new TTL, its old rows
    expire, and no other table loses a row."""
    def ttl(base, table):
        rows = sql_rows(base, "SELECT extract(create_table_query, ' TTL (.+?) SETTINGS ') AS ttl "
                              f"FROM system.tables WHERE name = '{table}'")
        return rows[0]["ttl"] if rows else None

    def counts():
        # Writes went to whichever pod the Service chose: the tenant's rows are the pods' sum.
        total = {}
        for p in tenant_pods():
            base = ACC.pod(p)
            have = tables(base)
            for t in (f"{DB}_autogen_lp", f"{DB}_autogen_mp", f"{DB}_raw_lp"):
                if t in have:
                    c = int(sql_rows(base, f"SELECT count() AS c FROM {t}")[0]["c"])
                    total[t] = total.get(t, 0) + c
        return total

    before = counts()
    if before.get(f"{DB}_raw_lp") != 2:
        raise Fail(f"expected the 2 rows written to {DB}/raw an hour before the run: {before}")
    t = kget("ingesttenant", TENANT)
    dbs = t["spec"]["databases"]
    for rp in dbs[0]["retentionPolicies"]:
        if rp["name"] == "raw":
            rp["duration"] = "1h"  # the raw rows are older than that
    patch_tenant({"spec": {"databases": dbs}})
    want = "toDateTime(time) + toIntervalSecond(3600)"

    def all_pods_have_new_ttl():
        pods = tenant_pods()
        got = {p["metadata"]["name"]: ttl(ACC.pod(p), f"{DB}_raw_lp") for p in pods if pod_ready(p)}
        return got if len(got) == len(pods) and all(v in (want, None) for v in got.values()) \
            and any(v == want for v in got.values()) else None
    got = wait_for("the new TTL on every pod's table", all_pods_have_new_ttl, 420, interval=2)
    wait_tenant_ready(timeout=300)
    wait_for("the raw rows to expire", lambda: counts().get(f"{DB}_raw_lp", 0) == 0 or None, 180, interval=3)
    after = counts()
    for t in (f"{DB}_autogen_lp", f"{DB}_autogen_mp"):
        if after.get(t) != before.get(t):
            raise Fail(f"{t}: {before.get(t)} rows before the edit, {after.get(t)} after")
    autogen = {p["metadata"]["name"]: ttl(ACC.pod(p), f"{DB}_autogen_lp") for p in tenant_pods()}
    if any(v not in (None, "toDateTime(time) + toIntervalSecond(2592000)") for v in autogen.values()):
        raise Fail(f"{DB}_autogen_lp's TTL changed: {autogen}")
    return (f"{DB}_raw_lp TTL {want} on {sorted(got)}; its 2 rows expired; "
            f"{DB}_autogen_lp/mp kept {before.get(DB + '_autogen_lp')}/{before.get(DB + '_autogen_mp')} rows")


@scenario
def operator_pod_deleted_tenant_untouched():
    """Delete the operator pods: the new ones take over and no tenant pod restarts."""
    pods_before = {p["metadata"]["name"]: pod_state(p)[:2] for p in tenant_pods()}
    sts_before = kget("statefulset", TENANT)["metadata"]
    dep = f"{RELEASE}-operator"
    lease_before = kget("lease", dep, OP_NS)["spec"]
    ops = kj("-n", OP_NS, "get", "pods", "-l", "app.kubernetes.io/name=sluice-operator")["items"]
    old = {p["metadata"]["name"] for p in ops}
    k("-n", OP_NS, "delete", "pod", "-l", "app.kubernetes.io/name=sluice-operator", "--wait=false")

    def new_leader():
        h = kget("lease", dep, OP_NS)["spec"].get("holderIdentity")
        pods = kj("-n", OP_NS, "get", "pods", "-l", "app.kubernetes.io/name=sluice-operator")["items"]
        ready = [p["metadata"]["name"] for p in pods if pod_ready(p) and p["metadata"]["name"] not in old]
        return h if h in ready and len(ready) == 2 else None
    leader = wait_for("a new operator leader", new_leader, 180, interval=2)
    # The new leader reconciles every tenant at start; give it time to (not) act, then poke it.
    k("-n", NS, "annotate", "ingesttenant", TENANT, f"e2e/poke={time.time()}", "--overwrite")
    time.sleep(20)
    pods_after = {p["metadata"]["name"]: pod_state(p)[:2] for p in tenant_pods()}
    sts_after = kget("statefulset", TENANT)["metadata"]
    if pods_after != pods_before:
        raise Fail(f"tenant pods changed: {pods_before} -> {pods_after}")
    if sts_after["generation"] != sts_before["generation"]:
        raise Fail(f"StatefulSet generation moved {sts_before['generation']} -> {sts_after['generation']}")
    tenant_ready()
    return (f"leader {lease_before.get('holderIdentity')} -> {leader}; {len(pods_before)} tenant pods kept their "
            f"UIDs and restart counts; StatefulSet generation {sts_after['generation']} unchanged")
