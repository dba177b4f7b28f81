"""Install and the basics: helm, a tenant becoming ready, writes read back, monitoring, a pod killed."""
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
def helm_install():
    """helm install --dry-run=server against the API server, then install, wait, and helm test."""
    for ns in (NS, OP_NS):  # a server-side dry run needs the namespaces to exist
        k("create", "namespace", ns, check=False)
    # Helm installs crds/ only when the CRD is absent and never upgrades it: bring an existing one
    # (an earlier run, the operator's tests) up to this checkout's, as users do on upgrade.
    if kget("crd", "ingesttenants.sluice.dev", ns="default"):
        k("apply", "--server-side", "--force-conflicts", "-f", os.path.join(CHART, "crds", "ingesttenant.yaml"))
    out = helm("install", RELEASE, CHART, "-n", OP_NS, "--create-namespace", "--dry-run=server", *helm_values(TAG))
    for kind in ("Deployment", "ServiceAccount", "Role", "RoleBinding"):
        if f"kind: {kind}" not in out:
            raise Fail(f"--dry-run=server rendered no {kind}")
    helm("install", RELEASE, CHART, "-n", OP_NS, "--create-namespace", "--wait", "--timeout", "5m", *helm_values(TAG))
    crd = kj("get", "crd", "ingesttenants.sluice.dev")
    if not any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"]):
        raise Fail("CRD not established")
    dep = kj("-n", OP_NS, "get", "deployment", f"{RELEASE}-operator")
    if dep["status"].get("readyReplicas") != 2:
        raise Fail(f"operator not ready: {dep['status']}")
    lease = wait_for("the leader Lease", lambda: (kget("lease", dep["metadata"]["name"], OP_NS) or {}).get("spec", {}).get("holderIdentity"), 60)
    out = helm("test", RELEASE, "-n", OP_NS, "--timeout", "3m", "--logs")
    if "all checks passed" not in out:
        raise Fail(f"helm test: {out[-1000:]}")
    return f"operator 2/2 ready, leader {lease}; helm test passed"


@scenario
def tenant_becomes_ready():
    """Apply a tenant and wait for its Ready condition."""
    apply(tenant_manifest())
    wait_tenant_ready(timeout=300)
    objs = {kind: bool(kget(kind, name)) for kind, name in [
        ("configmap", f"{TENANT}-config"), ("service", TENANT), ("service", f"{TENANT}-headless"),
        ("statefulset", TENANT), ("poddisruptionbudget", TENANT), ("pvc", f"data-{TENANT}-0")]}
    if not all(objs.values()):
        raise Fail(f"missing objects: {objs}")
    # a new Service: kube-proxy may need a moment
    status = wait_for("/ping through the Service", lambda: req("GET", ACC.service(), "/ping")[0], 60)
    if status != 204:
        raise Fail(f"/ping answered {status}")
    return "Ready; ConfigMap, Services, StatefulSet, PDB, PVC present; /ping 204 through the Service"


@scenario
def write_and_read_back():
    """Line protocol (v1, v2, two policies) and msgpack through the Service; exact counts and values."""
    svc = ACC.service()
    n = 1000
    # Timestamps an hour ago: the tables' TTL (the policies' durations) drops older rows.
    t0 = int(time.time()) - 3600
    lp = "\n".join(f"lp,host=h{i % 10},region=eu\\ west v={i * 0.5},n={i}i,s=\"s{i}\",ok={'true' if i % 2 else 'false'} "
                   f"{t0 + i}" for i in range(n))
    st, body = write(svc, lp, precision="s")
    if st != 204:
        raise Fail(f"line protocol write answered {st}: {body!r}")
    st, body = write(svc, f"lp,host=raw v=1 {t0}\nlp,host=raw v=2 {t0 + 1}", rp="raw", precision="s", v2=True)
    if st != 204:
        raise Fail(f"v2 write to {DB}/raw answered {st}: {body!r}")
    m = 500
    msg = [{"measurement": "mp", "tags": {"host": "m1"}, "timestamps": list(range(t0 * 1000, t0 * 1000 + m)),
            "fields": {"x": [i * 0.25 for i in range(m)], "y": list(range(m)),
                       "z": [None if i % 5 == 0 else f"z{i}" for i in range(m)]}},
           {"measurement": "mp", "tags": {"host": "m2"}, "timestamps": [t0 * 1000], "fields": {"y": [-7]}}]
    st, body = write(svc, mp(msg), precision="ms", content_type="application/msgpack")
    if st != 204:
        raise Fail(f"msgpack write answered {st}: {body!r}")
    st, body = write(svc, "nope v=1", db="absent")
    if st != 404:
        raise Fail(f"write to an unknown database answered {st} (autoCreateDatabases is false)")

    def lp_ok():
        r = sql_rows(svc, f"SELECT count() AS c, sum(n) AS sn, sum(v) AS sv, countIf(ok) AS t, "
                          f"uniqExact(series_id) AS series, min(time) AS t0, max(s) AS smax FROM {DB}_autogen_lp")[0]
        if int(r["c"]) != n:
            raise Fail(f"{r['c']} rows of {n}")
        return r
    r = wait_for("line protocol rows", lp_ok, 60)
    want = {"sn": sum(range(n)), "sv": sum(i * 0.5 for i in range(n)), "t": n // 2, "series": 10}
    got = {"sn": int(r["sn"]), "sv": float(r["sv"]), "t": int(r["t"]), "series": int(r["series"])}
    if got != want or not r["t0"].startswith(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0))):
        raise Fail(f"line protocol values: got {got} t0={r['t0']}, want {want}")
    tags = wait_for("the series dimension rows", lambda: sql_rows(
        svc, "SELECT DISTINCT tags['region'] AS region FROM sluice_series WHERE measurement = 'lp' AND mapContains(tags, 'region')"), 30)
    if [t["region"] for t in tags] != ["eu west"]:
        raise Fail(f"escaped tag value read back as {tags}")
    raw = wait_for(f"{DB}_raw_lp", lambda: [r for r in sql_rows(svc, f"SELECT sum(v) AS s FROM {DB}_raw_lp") if r["s"]], 30)
    if float(raw[0]["s"]) != 3.0:
        raise Fail(f"{DB}_raw_lp: {raw}")

    def mp_ok():
        r = sql_rows(svc, f"SELECT count() AS c, sum(y) AS sy, sum(x) AS sx, countIf(z IS NULL) AS zn FROM {DB}_autogen_mp")[0]
        if int(r["c"]) != m + 1:
            raise Fail(f"{r['c']} msgpack rows of {m + 1}")
        return r
    r = wait_for("msgpack rows", mp_ok, 60)
    if (int(r["sy"]), float(r["sx"]), int(r["zn"])) != (sum(range(m)) - 7, sum(i * 0.25 for i in range(m)), m // 5 + 1):
        raise Fail(f"msgpack values: {r}")
    return f"{n} line-protocol points (v1), 2 (v2, rp raw), {m + 1} msgpack points read back exactly; unknown db 404"


def metric_names(text):
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


# Counters with labels appear in /metrics only once something was counted; a healthy run has no
# flush failures or backpressure.
ONLY_AFTER_TROUBLE = {"sluice_flush_failures_total", "sluice_backpressure_total", "sluice_chdb_errors_total",
                      "sluice_operator_reconcile_errors_total",
                      # per tenant, once a tenant has autoscaling.enabled
                      "sluice_operator_autoscaler_at_max", "sluice_operator_autoscaler_p95_seconds",
                      "sluice_operator_autoscaler_p95_target_seconds"}


@scenario
def monitoring_follows_the_api():
    """The server's and operator's /metrics have every metric the alerts and dashboard use; with the
    Prometheus Operator's CRDs present, helm upgrade adds the PodMonitors and the PrometheusRule."""
    rules = open(os.path.join(CHART, "files", "alerts.yaml")).read()
    dash = open(os.path.join(CHART, "files", "dashboard.json")).read()
    used = set(re.findall(r"\bsluice_[a-z0-9_]+", rules + dash))
    used = {re.sub(r"_(bucket|count|sum)$", "", m) for m in used if not m.startswith("sluice_tenant_")}
    pod = tenant_pods()[0]
    base = ACC.pod(pod)
    write(base, "bad line without fields")              # sluice_points_rejected_total{reason}
    st, text = req("GET", base, "/metrics")
    exported = metric_names(text.decode())
    # Every operator pod: the leader has counted reconciles and applies, a standby has not.
    for op in kj("-n", OP_NS, "get", "pods", "-l", "app.kubernetes.io/name=sluice-operator")["items"]:
        if not pod_ready(op):
            continue
        if ACCESS == "direct":
            _, optext = req("GET", f"http://{op['status']['podIP']}:8080", "/metrics")
        else:
            optext = sh(KUBECTL + ["get", "--raw", f"/api/v1/namespaces/{OP_NS}/pods/{op['metadata']['name']}:8080/proxy/metrics"]).stdout.encode()
        exported |= metric_names(optext.decode())
    exported = {re.sub(r"_(bucket|count|sum)$", "", m) for m in exported}
    missing = sorted(used - exported - ONLY_AFTER_TROUBLE)
    if missing:
        raise Fail(f"alerts/dashboard use metrics no pod exports: {missing}")
    detail = f"{len(used)} metric names used by alerts and dashboard, all exported ({len(used & ONLY_AFTER_TROUBLE)} only after trouble)"
    if not MONITORING_CRDS:
        return detail + "; no Prometheus Operator CRDs available: PodMonitor/PrometheusRule not checked"
    for kind in ("podmonitors", "prometheusrules"):
        name = f"{kind}.monitoring.coreos.com"
        if not kget("crd", name, ns="default"):
            k("apply", "--server-side", "-f", os.path.join(MONITORING_CRDS, f"monitoring.coreos.com_{kind}.yaml"))
            INSTALLED_CRDS.append(name)
        # Not `kubectl wait --for=condition=Established`: on a CRD created a moment ago that has
        # no status yet, it fails at once ("status.conditions accessor error") instead of waiting.
        wait_for(f"CRD {name} established", lambda n=name: established(kget("crd", n, ns="default")), 60)
    ops_before = {p["metadata"]["uid"] for p in kj("-n", OP_NS, "get", "pods", "-l", "app.kubernetes.io/name=sluice-operator")["items"]}
    helm("upgrade", RELEASE, CHART, "-n", OP_NS, "--wait", "--timeout", "3m", *helm_values(TAG))
    pms = kj("-n", OP_NS, "get", "podmonitors")["items"]
    prs = kj("-n", OP_NS, "get", "prometheusrules")["items"]
    if len(pms) != 2 or len(prs) != 1:
        raise Fail(f"with the monitoring API: {len(pms)} PodMonitors, {len(prs)} PrometheusRules")
    ops_after = {p["metadata"]["uid"] for p in kj("-n", OP_NS, "get", "pods", "-l", "app.kubernetes.io/name=sluice-operator")["items"]}
    if ops_after != ops_before:
        raise Fail("a helm upgrade that only adds monitoring objects restarted the operator")
    groups = prs[0]["spec"]["groups"]
    promtool = shutil.which("promtool")
    if promtool:
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump({"groups": groups}, f)  # YAML is a superset of JSON
            f.flush()
            sh([promtool, "check", "rules", f.name])
    alerts = sum(1 for g in groups for r in g["rules"] if "alert" in r)
    return (detail + f"; CRDs present: helm upgrade added 2 PodMonitors and a PrometheusRule ({alerts} alerts"
            + (", promtool check ok" if promtool else "") + "), operator pods kept")


@scenario
def kill_pod_while_writing():
    """Kill the server pod while a writer runs; every acknowledged point is there afterwards."""
    w = Writer("killed")
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 20, 60)
    pod = tenant_pods()[0]
    uid, restarts, _ = pod_state(pod)
    how = kill_pod(pod)
    acked_at_kill = len(w.acked)
    log(f"killed {pod['metadata']['name']} ({how}) after {acked_at_kill} acknowledged batches")
    wait_for("the pod to restart", lambda: (lambda p: p and pod_state(p[0])[:2] != (uid, restarts))(tenant_pods()), 120)
    wait_tenant_ready(timeout=240)
    wait_for("writes acknowledged after the restart", lambda: len(w.acked) >= acked_at_kill + 20, 120)
    w.stop()
    return f"{how}; " + w.verify(allow_refused=True)
