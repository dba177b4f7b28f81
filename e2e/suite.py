#!/usr/bin/env python3
"""sluice end-to-end scenarios against a real Kubernetes cluster.

Run through `e2e/run`, which picks the cluster (kind, localkube, or SLUICE_E2E_KUBECONFIG), builds
and loads the images, and sets the environment below. The suite itself only needs kubectl, helm
and HTTP access to the tenant's pods (directly to Service and pod IPs, or through
`kubectl port-forward`), so it runs the same on every cluster.

Environment (all optional except the images being loadable by the cluster):
  SLUICE_E2E_KUBECTL, SLUICE_E2E_HELM   commands (default: kubectl, helm from PATH)
  SLUICE_E2E_ACCESS       direct (Service/pod IPs reachable from here, e.g. localkube) or
                          port-forward (default)
  SLUICE_E2E_CTR          command prefix that runs `ctr` in the node's containerd, e.g.
                          "localkube ctr" or "docker exec kind-control-plane ctr -n k8s.io";
                          with it a pod is killed with SIGKILL, without it by a forced delete
  SLUICE_E2E_OPERATOR_IMAGE, SLUICE_E2E_SERVER_IMAGE   repository names (sluice-operator, sluice-server)
  SLUICE_E2E_TAG, SLUICE_E2E_TAG2         image tags before and after `helm upgrade` (e2e, e2e2)
  SLUICE_E2E_TEST_IMAGE   image for `helm test` (busybox with sh and wget)
  SLUICE_E2E_STORAGE_CLASS  storage class of the tenant's volumes (default: the cluster default)
  SLUICE_E2E_RESULTS      write a JSON summary (scenario, seconds, outcome) to this file
  SLUICE_E2E_MONITORING_CRDS  directory with the Prometheus Operator's CRDs (monitoring.coreos.com_*.yaml);
                          e2e/run takes them from the Go module github.com/prometheus-operator/prometheus-operator

  e2e/suite.py [--only a,b] [--keep] [--list]
Every wait is bounded; a failed scenario prints what it saw and the suite stops (later scenarios
depend on the state earlier ones leave), then cleans up unless --keep.
"""
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KUBECTL = shlex.split(os.environ.get("SLUICE_E2E_KUBECTL", "kubectl"))
HELM = shlex.split(os.environ.get("SLUICE_E2E_HELM", "helm"))
CTR = shlex.split(os.environ.get("SLUICE_E2E_CTR", ""))
ACCESS = os.environ.get("SLUICE_E2E_ACCESS", "port-forward")
OP_IMAGE = os.environ.get("SLUICE_E2E_OPERATOR_IMAGE", "sluice-operator")
SERVER_IMAGE = os.environ.get("SLUICE_E2E_SERVER_IMAGE", "sluice-server")
TAG = os.environ.get("SLUICE_E2E_TAG", "e2e")
TAG2 = os.environ.get("SLUICE_E2E_TAG2", "e2e2")
TEST_IMAGE = os.environ.get("SLUICE_E2E_TEST_IMAGE", "busybox:1.36")
STORAGE_CLASS = os.environ.get("SLUICE_E2E_STORAGE_CLASS", "")
MONITORING_CRDS = os.environ.get("SLUICE_E2E_MONITORING_CRDS", "")
INSTALLED_CRDS = []  # monitoring CRDs this run created (and removes again)

RELEASE = "sluice-e2e"
OP_NS = "sluice-e2e-system"   # the release's namespace (not sluice-system: operator/e2e uses that)
NS = "sluice-e2e"             # the tenants' namespace; the operator watches only it, so that
                              # other tests' tenants on a shared cluster are left alone
TENANT = "e2e"
CHART = os.path.join(ROOT, "charts", "sluice")
DB = "telegraf"


class Fail(Exception):
    pass


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- kubectl / helm -----------------------------------------------------------------------------

def sh(cmd, input=None, check=True, timeout=180):
    try:
        r = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail(f"timed out after {timeout}s: {' '.join(cmd)}")
    if check and r.returncode != 0:
        raise Fail(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return r


def k(*args, **kw):
    return sh(KUBECTL + list(args), **kw).stdout


def kj(*args, **kw):
    out = k(*args, "-o", "json", **kw)
    return json.loads(out) if out.strip() else None


def kget(kind, name, ns=NS):
    r = sh(KUBECTL + ["-n", ns, "get", kind, name, "-o", "json"], check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def established(crd):
    """Whether a CustomResourceDefinition object has condition Established=True."""
    conds = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conds)


def helm(*args, timeout=600):
    return sh(HELM + list(args), timeout=timeout).stdout


def apply(obj):
    k("apply", "-f", "-", input=json.dumps(obj))


def wait_for(what, fn, timeout, interval=1.0):
    """Calls fn until it returns something truthy; Fail with the last observation after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except Fail as e:
            last = str(e)
        except Exception as e:  # noqa: BLE001 - objects come and go while we wait
            last = repr(e)
        if time.monotonic() >= deadline:
            raise Fail(f"timed out after {timeout}s waiting for {what}" + (f" (last: {last})" if last else ""))
        time.sleep(interval)


# --- HTTP to the tenant -------------------------------------------------------------------------

def req(method, base, path, body=None, headers=None, timeout=15, retry=True):
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException):
        # A port-forward dies with its pod (or keeps running but forwards nowhere): start a new
        # one to the same Service or pod and try once more.
        fresh = ACC.refresh(base) if retry else None
        if not fresh:
            raise
        return req(method, fresh, path, body, headers, timeout, retry=False)
    finally:
        c.close()


class Access:
    """Base URLs of the tenant's Service and pods: their cluster IPs, or local port-forwards."""

    def __init__(self, mode):
        self.mode = mode
        self.forwards = {}  # target -> (process, port)
        self.targets = {}   # every port ever forwarded -> its target
        self.lock = threading.Lock()

    def _forward(self, target):
        with self.lock:
            p = self.forwards.get(target)
            if p and p[0].poll() is None:
                return f"http://127.0.0.1:{p[1]}"
            proc = subprocess.Popen(KUBECTL + ["-n", NS, "port-forward", target, ":8086", "--address", "127.0.0.1"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            line = proc.stdout.readline()  # "Forwarding from 127.0.0.1:PORT -> 8086"
            m = re.search(r"127\.0\.0\.1:(\d+)", line)
            if not m:
                proc.kill()
                raise Fail(f"port-forward to {target} failed: {line!r}")
            self.forwards[target] = (proc, int(m.group(1)))
            self.targets[int(m.group(1))] = target
            return f"http://127.0.0.1:{m.group(1)}"

    def refresh(self, base):
        """The base URL of a new port-forward replacing the one at `base`; None in direct mode."""
        if self.mode == "direct":
            return None
        port = urllib.parse.urlsplit(base).port
        with self.lock:
            target = self.targets.get(port)
            if target is None:
                return None
            current = self.forwards.get(target)
            if current and current[1] == port:  # this forward is the broken one: replace it
                self.forwards.pop(target)
                current[0].kill()
                current[0].wait()
            elif current and current[0].poll() is None:  # already replaced by a live one
                return f"http://127.0.0.1:{current[1]}"
        time.sleep(0.5)
        return self._forward(target)

    def service(self, name=TENANT):
        if self.mode == "direct":
            with self.lock:
                if name not in self.forwards:  # a ClusterIP does not change while the Service exists
                    svc = kget("service", name)
                    if not svc:
                        raise Fail(f"no Service {name}")
                    self.forwards[name] = (None, f"http://{svc['spec']['clusterIP']}:8086")
                return self.forwards[name][1]
        return self._forward(f"svc/{name}")

    def pod(self, pod):
        if self.mode == "direct":
            return f"http://{pod['status']['podIP']}:8086"
        return self._forward(f"pod/{pod['metadata']['name']}")

    def reset(self):
        with self.lock:
            for proc, _ in self.forwards.values():
                if proc:
                    proc.kill()
            self.forwards.clear()


ACC = Access(ACCESS)


def write(base, body, db=DB, rp=None, precision="ns", content_type=None, v2=False):
    headers = {"Content-Type": content_type} if content_type else {}
    if v2:
        path = f"/api/v2/write?bucket={db}{'/' + rp if rp else ''}&precision={precision}"
    else:
        path = f"/write?db={db}&precision={precision}" + (f"&rp={rp}" if rp else "")
    return req("POST", base, path, body=body.encode() if isinstance(body, str) else body, headers=headers)


def sql(base, q):
    status, body = req("POST", base, "/sql", body=q.encode())
    if status != 200:
        raise Fail(f"/sql {q!r} answered {status}: {body[:300]!r}")
    return body.decode()


def sql_rows(base, q):
    return json.loads(sql(base, q + " FORMAT JSON"))["data"]


def tables(base):
    return {r["name"] for r in sql_rows(base, "SELECT name FROM system.tables WHERE database = currentDatabase()")}


# --- msgpack (the server's columnar write format), enough of it for the test ----------------------

def mp(v):
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack("b", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)]) if len(b) < 256
                else b"\xda" + struct.pack(">H", len(b))) + b
    if isinstance(v, (list, tuple)):
        head = bytes([0x90 | len(v)]) if len(v) < 16 else b"\xdd" + struct.pack(">I", len(v))
        return head + b"".join(mp(x) for x in v)
    if isinstance(v, dict):
        head = bytes([0x80 | len(v)]) if len(v) < 16 else b"\xdf" + struct.pack(">I", len(v))
        return head + b"".join(mp(a) + mp(b) for a, b in v.items())
    raise TypeError(v)


# --- the tenant ---------------------------------------------------------------------------------

def tenant_manifest(**spec):
    base = {
        "image": f"{SERVER_IMAGE}:{TAG}",
        "imagePullPolicy": "IfNotPresent",
        "replicas": 1,
        "autoCreateDatabases": False,
        "databases": [{"name": DB, "retentionPolicies": [
            {"name": "autogen", "duration": "30d", "default": True},
            {"name": "raw", "duration": "7d"}]}],
        "pool": {"connections": 1, "flushWorkers": 1, "flushInterval": "500ms"},
        "storage": {"size": "1Gi", "reclaimPolicy": "Retain"},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "3Gi"}},
        "terminationGracePeriodSeconds": 30,
    }
    if STORAGE_CLASS:
        base["storage"]["storageClassName"] = STORAGE_CLASS
    base.update(spec)
    return {"apiVersion": "sluice.dev/v1alpha1", "kind": "IngestTenant",
            "metadata": {"name": TENANT, "namespace": NS}, "spec": base}


def patch_tenant(patch):
    k("-n", NS, "patch", "ingesttenant", TENANT, "--type", "merge", "-p", json.dumps(patch))


def tenant_pods(name=TENANT):
    pods = kj("-n", NS, "get", "pods", "-l", f"app.kubernetes.io/name=sluice-server,app.kubernetes.io/instance={name}")
    return sorted(pods["items"], key=lambda p: p["metadata"]["name"])


def pod_ready(p):
    return p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))


def pod_state(p):
    cs = (p["status"].get("containerStatuses") or [{}])[0]
    return p["metadata"]["uid"], cs.get("restartCount", 0), cs.get("containerID")


def tenant_ready(replicas=None):
    """Ready condition true for the current generation, every pod ready on the current revision."""
    t = kget("ingesttenant", TENANT)
    if not t:
        raise Fail("no tenant")
    st = t.get("status", {})
    want = replicas if replicas is not None else t["spec"]["replicas"]
    cond = {c["type"]: c for c in st.get("conditions", [])}
    ready = cond.get("Ready", {})
    sts = kget("statefulset", TENANT) or {}
    ss = sts.get("status", {})
    pods = tenant_pods()
    ok = (st.get("observedGeneration") == t["metadata"]["generation"] and ready.get("status") == "True"
          and st.get("readyReplicas") == want and st.get("replicas") == want
          and ss.get("currentRevision") == ss.get("updateRevision") and ss.get("readyReplicas") == want
          and len(pods) == want and all(pod_ready(p) for p in pods))
    if not ok:
        raise Fail(f"phase={st.get('phase')} Ready={ready.get('status')}/{ready.get('reason')}: {ready.get('message')}; "
                   f"pods={[(p['metadata']['name'], pod_ready(p)) for p in pods]}")
    return t


def wait_tenant_ready(timeout=300, replicas=None):
    return wait_for(f"tenant {TENANT} Ready", lambda: tenant_ready(replicas), timeout, interval=2)


def tenant_sql(inner, outer, base=None):
    """/sql across the tenant, through its Service (or the pod at `base`): `inner` runs on every
    pod, `outer` reads their answers as the table `tenant`. The answer must say it read the whole
    tenant."""
    body = urllib.parse.urlencode({"inner": inner, "q": outer + " FORMAT JSON"}).encode()
    base = base or ACC.service()
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        c.request("POST", "/sql", body=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        r = c.getresponse()
        status, text, scope = r.status, r.read(), r.getheader("X-Sluice-Scope")
    except (OSError, http.client.HTTPException) as e:
        ACC.refresh(base)
        raise Fail(f"/sql across the tenant: {e}")
    finally:
        c.close()
    if status != 200:
        raise Fail(f"/sql inner={inner!r} q={outer!r} answered {status}: {text[:300]!r}")
    if scope != "tenant":
        raise Fail(f"/sql with inner answered X-Sluice-Scope {scope!r}, not 'tenant'")
    return json.loads(text)["data"]


def influxql(q):
    """One InfluxQL statement as Grafana sends it (`epoch=ms`), through the tenant's Service: its
    series, or Fail with the statement's error."""
    st, body = req("GET", ACC.service(), "/query?" + urllib.parse.urlencode({"db": DB, "epoch": "ms", "q": q}))
    if st != 200:
        raise Fail(f"{q}: {st} {body[:300]!r}")
    res = json.loads(body)["results"][0]
    if "error" in res:
        raise Fail(f"{q}: {res['error']}")
    return res.get("series", [])


def count_by_batch(table):
    """{batch: rows} over the whole tenant: one read through the Service, which every pod answers
    its share of."""
    rows = tenant_sql(f"SELECT b, count() AS n FROM {table} GROUP BY b",
                      "SELECT b, sum(n) AS n FROM tenant GROUP BY b")
    return {int(r["b"]): int(r["n"]) for r in rows}


class Writer(threading.Thread):
    """Writes batches of `size` points through the tenant's Service until stopped. Each batch has its
    own id (field b) and unique timestamps. 204 = acknowledged: must be present exactly once.
    Anything else (5xx, refused, reset, timeout) = in doubt: present once or absent, never twice."""

    def __init__(self, name, size=200, pause=0.02):
        super().__init__(daemon=True)
        self.table = f"{DB}_autogen_{name}"
        self.measurement, self.size, self.pause = name, size, pause
        self.acked, self.doubt, self.refused = [], [], []
        self.stop_ = threading.Event()
        self.next = 0
        self.t0 = (int(time.time()) - 3600) * 10**9 + random.randrange(10**9)  # recent: within every TTL

    def body(self, b):
        return "\n".join(f"{self.measurement},w=e2e b={b}i,i={j}i {self.t0 + b * self.size + j}"
                         for j in range(self.size))

    def run(self):
        while not self.stop_.is_set():
            b = self.next
            self.next += 1
            try:
                status, answer = write(ACC.service(), self.body(b))
                if status == 204:
                    self.acked.append(b)
                elif status == 503 or status >= 500:
                    self.doubt.append(b)
                else:
                    self.refused.append((b, status, answer[:200].decode(errors="replace"), time.strftime("%H:%M:%S")))
            except (OSError, http.client.HTTPException, Fail):
                self.doubt.append(b)
                time.sleep(0.2)
            time.sleep(self.pause)

    def stop(self):
        self.stop_.set()
        self.join(timeout=30)

    def verify(self, timeout=120, allow_refused=False):
        """Waits until every acknowledged batch is queryable, then checks exactness. A refused
        (4xx) batch must never be stored; `allow_refused` tolerates refusals themselves (reported,
        not fatal) where a rollout is under way: see the known issue in e2e/README.md."""
        if self.refused and not allow_refused:
            raise Fail(f"writes refused with 4xx: {self.refused[:5]}")
        if self.refused:
            print(f"    WARNING: {len(self.refused)} writes refused during the rollout: {self.refused[:5]}",
                  flush=True)
        if len(self.acked) < 10:
            raise Fail(f"only {len(self.acked)} batches acknowledged")

        def complete():
            c = count_by_batch(self.table)
            missing = [b for b in self.acked if c.get(b, 0) < self.size]
            if missing:
                raise Fail(f"{len(missing)} acknowledged batches not (yet) complete, e.g. {missing[:5]}")
            return c
        c = wait_for(f"all acknowledged points of {self.table}", complete, timeout, interval=2)
        acked, doubt = set(self.acked), set(self.doubt)
        bad = {b: n for b, n in c.items() if (b in acked and n != self.size)
               or (b in doubt and n not in (0, self.size)) or (b not in acked and b not in doubt)}
        if bad:
            raise Fail(f"wrong row counts per batch (want {self.size} for acknowledged, 0 or {self.size} "
                       f"for in-doubt, none otherwise): {dict(list(bad.items())[:10])}")
        rows = sum(c.values())
        present_doubt = sum(1 for b in doubt if c.get(b))
        return (f"{len(acked)} batches ({len(acked) * self.size} points) acknowledged, all present exactly once; "
                f"{len(doubt)} in doubt ({present_doubt} present); {len(self.refused)} refused (absent); "
                f"{rows} rows")


# --- scenarios ----------------------------------------------------------------------------------

SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


def helm_values(tag):
    return ["--set", f"image.repository={OP_IMAGE}", "--set", f"image.tag={tag}",
            "--set", f"serverImage.repository={SERVER_IMAGE}", "--set", f"serverImage.tag={tag}",
            "--set", f"operator.watchNamespace={NS}", "--set", f"test.image={TEST_IMAGE}"]


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


def kill_pod(pod):
    """SIGKILL the server process through the node's containerd; else a forced delete."""
    _, _, cid = pod_state(pod)
    if CTR and cid:
        sh(CTR + ["task", "kill", "--signal", "SIGKILL", cid.split("://", 1)[-1]])
        return "SIGKILL"
    k("-n", NS, "delete", "pod", pod["metadata"]["name"], "--grace-period=0", "--force", "--wait=false")
    return "forced delete"


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

    # A scale-down reaches the remaining pod's peer list when the kubelet refreshes it (about a
    # minute): until then its reads name the pod that is gone.
    names = wait_for("reads without the removed pod", lambda: {
        v[0] for s in influxql("SHOW MEASUREMENTS") for v in s["values"]}, 150, interval=3)
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
    # A running pod learns the new peer list when the kubelet refreshes its ConfigMap volume
    # (about a minute): until then its reads miss the new pods, and verify() waits for that.
    verified = w.verify(timeout=240)
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
    # The pod that was running learns of the two new ones when the kubelet refreshes its peer list
    # (until then, reads through it see its own share only).
    wait_for("every pod to read the whole tenant", every_pod_reads_all, 150, interval=3)
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
    names = {v[0] for s in influxql("SHOW MEASUREMENTS") for v in s["values"]}
    if "spread" not in names:
        raise Fail(f"SHOW MEASUREMENTS: {sorted(names)}")
    shrunk = shrink_to_one(total, "three")
    return (f"{verified}; spread over the pods as {per_pod}; InfluxQL count {total} through the "
            f"Service six times; {shrunk}")


def influxql_count(measurement):
    row = influxql(f'SELECT count("i") FROM "{measurement}" WHERE time > now() - 1d')
    return row[0]["values"][0][1] if row else 0


def decommissioned_events(reason="Decommissioned", name=TENANT):
    """How many times the operator reported `reason` for tenant `name` (a repeated Event counts
    in its series); by default, pods emptied."""
    return sum((e.get("series") or {}).get("count", 1)
               for e in kj("-n", NS, "get", "events.events.k8s.io")["items"]
               if e.get("reason") == reason and (e.get("regarding") or {}).get("name") == name)


def shrink_to_one(total, tag):
    """Scales the tenant to 1 under writers: the leaving pods hand their data to pod 0, one at a
    time, before the StatefulSet shrinks. Meanwhile every InfluxQL count through the Service is
    exact (or an error while a pod is gone from a peer list, never a wrong number); after it,
    every acknowledged point is there exactly once, and pod 0 holds all of `spread`."""
    before = decommissioned_events()
    w = Writer(f"shrink{tag}", size=100, pause=0.01)
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 100, 120)
    started = time.time()
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=1")
    exact, failed = 0, 0
    deadline = time.time() + 600
    while len(tenant_pods()) > 1:
        if time.time() > deadline:
            raise Fail(f"still {len(tenant_pods())} pods after 600 s: {kj('-n', NS, 'get', 'ingesttenant', TENANT).get('status', {}).get('decommission')}")
        try:
            n = influxql_count("spread")
        except (Fail, OSError, http.client.HTTPException):
            failed += 1
        else:
            if n != total:
                raise Fail(f"InfluxQL count of spread during the scale-down: {n}, want {total}")
            exact += 1
        time.sleep(1)
    took = time.time() - started
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
            f"during it exact, {failed} failed (a pod leaving a peer list); pod 0 holds all {total}")


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
    bulk = write_bulk("bulk", 30, 20000)
    w = Writer("killing", size=100, pause=0.01)
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 50, 120)
    k("-n", NS, "scale", "ingesttenant", TENANT, "--replicas=1")
    done = []

    def leaving(ordinal):
        d = decommission_status()
        return d if d and d.get("ordinal") == ordinal and d.get("phase") not in ("none", "empty") else None

    d = wait_for("pod 2 handing over", lambda: leaving(2), 180, interval=0.2)
    pods = {p["metadata"]["name"]: p for p in tenant_pods()}
    done.append(f"pod 2 {kill_pod(pods[f'{TENANT}-2'])} in phase {d['phase']}")
    d = wait_for("pod 2 handing over again", lambda: leaving(2), 180, interval=0.2)
    pods = {p["metadata"]["name"]: p for p in tenant_pods()}
    done.append(f"receiver pod 0 {kill_pod(pods[f'{TENANT}-0'])} in phase {d['phase']}")
    d = wait_for("pod 1 handing over", lambda: leaving(1), 300, interval=0.2)
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
    wait_for("pod 1's volume deleted", lambda: claims() == [f"data-{TENANT}-0"] or None, 120, interval=2)
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
        st, ans = write(ACC.pod(now1[0]), f"fine,h=a i=2i {ts + 1}")
        if st != 204:
            raise Fail(f"pod 1 after the cancel: {st} {ans[:200]!r}")
        return f"refused: {cond['message'][:200]}; both pods kept, pod 1 takes writes again"
    finally:
        k("-n", NS, "delete", "ingesttenant", name, "--wait=true", "--timeout=180s", check=False)


def sluice_load():
    """The load generator `cargo` built (release when there is one)."""
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    for profile in ("release", "debug"):
        path = os.path.join(target, profile, "sluice-load")
        if os.access(path, os.X_OK):
            return path
    raise Fail(f"no sluice-load under {target}: cargo build -p sluice-load")


@scenario
def autoscaler_scales_with_real_load_up_and_back_down():
    """A second tenant with autoscaling on (1 to 2 replicas, each pod limited to half a CPU, a
    30 s scale-down window): an open-model load beyond one pod's capacity through its Service
    makes the autoscaler add a pod (spec.replicas 2, status.lastScaling, an Autoscaled Event)
    that becomes Ready; when the load stops it removes that pod again, through decommissioning,
    and every point stays readable exactly once; then the tenant is deleted."""
    name = "auto"
    manifest = tenant_manifest(
        replicas=1,
        scaling={"minReplicas": 1, "maxReplicas": 2},
        autoscaling={"enabled": True, "p95Target": "250ms",
                     "scaleDownWindow": "30s", "scaleDownCooldown": "30s"},
        resources={"requests": {"cpu": "100m", "memory": "256Mi"},
                   "limits": {"cpu": "500m", "memory": "2Gi"}},
        storage={"size": "1Gi", "reclaimPolicy": "Delete",
                 **({"storageClassName": STORAGE_CLASS} if STORAGE_CLASS else {})})
    manifest["metadata"]["name"] = name
    apply(manifest)
    try:
        def ready(n):
            t = kget("ingesttenant", name) or {}
            st = t.get("status", {})
            return st.get("readyReplicas") == n and st.get("replicas") == n and len(tenant_pods(name)) == n
        wait_for(f"tenant {name} Ready", lambda: ready(1), 300, interval=2)
        base = ACC.service(name)
        load = subprocess.Popen(
            [sluice_load(), "--url", base, "--db", DB, "--measurement", "auto", "--points", "5000",
             "--series", "1000", "--fields", "5", "--connections", "16", "--timeout", "10s",
             "--rate", "2M", "--duration", "240s", "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            t = wait_for("the autoscaler to add a pod", lambda: (
                (kget("ingesttenant", name) or {}).get("spec", {}).get("replicas") == 2
                and kget("ingesttenant", name)), 200, interval=2)
            wait_for(f"two Ready pods of {name}", lambda: ready(2), 240, interval=2)
        finally:
            load.kill()
            load.wait()
        up = t.get("status", {}).get("lastScaling") or {}
        if (up.get("from"), up.get("to")) != (1, 2):
            raise Fail(f"status.lastScaling: {up}")

        def count():
            st, body = req("GET", ACC.service(name), "/query?" + urllib.parse.urlencode(
                {"db": DB, "q": 'SELECT count("f0") FROM "auto"'}))
            res = json.loads(body)["results"][0] if st == 200 else {}
            if "series" not in res:
                raise Fail(f"count through the Service: {st} {body[:200]!r}")
            return res["series"][0]["values"][0][1]
        # What the load left, once every pod has flushed it (the same count twice, 3 s apart).
        stored = [None]

        def settled():
            n = count()
            same, stored[0] = n == stored[0], n
            return same and n
        wait_for("the load's points flushed", settled, 120, interval=3)
        total = stored[0]
        def removed():
            t = kget("ingesttenant", name) or {}
            if t.get("spec", {}).get("replicas") == 1:
                return t
            st = t.get("status", {})
            raise Fail(f"replicas {t.get('spec', {}).get('replicas')}; status: " + json.dumps(
                {k: st.get(k) for k in ("rate", "p95", "knee", "lastScaling", "plateau", "decommission",
                                        "readyReplicas")}))
        wait_for("the autoscaler to remove the pod", removed, 240, interval=2)
        wait_for(f"one pod of {name} left", lambda: ready(1), 300, interval=2)
        last = (kget("ingesttenant", name) or {}).get("status", {}).get("lastScaling") or {}
        if (last.get("from"), last.get("to")) != (2, 1):
            raise Fail(f"status.lastScaling after the load: {last}")
        handed = decommissioned_events("Decommissioned", name)
        if handed < 1:
            raise Fail("the pod was removed without a Decommissioned Event")
        after = wait_for("every point once through the Service", lambda: (lambda n: n if n == total else None)(
            count()), 120, interval=3)
        # A repeated Event counts in its series.
        scaled = decommissioned_events("Autoscaled", name)
        if scaled < 2:
            raise Fail(f"{scaled} Autoscaled Events, want one per change")
        return (f"1 -> 2 ({up.get('reason')}), 2 -> 1 after the load ({last.get('reason')}), the pod "
                f"decommissioned; {after} points exact; {scaled} Autoscaled Events")
    finally:
        k("-n", NS, "delete", "ingesttenant", name, "--wait=true", "--timeout=180s", check=False)


@scenario
def helm_upgrade_new_image_tag():
    """helm upgrade the operator to a new image tag (tenant pods untouched), then move the tenant to
    the new server tag under load (rolled, nothing lost)."""
    pods_before = {p["metadata"]["name"]: pod_state(p)[:2] for p in tenant_pods()}
    helm("upgrade", RELEASE, CHART, "-n", OP_NS, "--wait", "--timeout", "5m", *helm_values(TAG2))
    dep = kj("-n", OP_NS, "get", "deployment", f"{RELEASE}-operator")
    img = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    wait_for("operator pods on the new tag", lambda: all(
        p["spec"]["containers"][0]["image"] == f"{OP_IMAGE}:{TAG2}" and pod_ready(p)
        for p in kj("-n", OP_NS, "get", "pods", "-l", "app.kubernetes.io/name=sluice-operator")["items"]
        if not p["metadata"].get("deletionTimestamp")), 180, interval=2)
    time.sleep(10)
    if {p["metadata"]["name"]: pod_state(p)[:2] for p in tenant_pods()} != pods_before:
        raise Fail("the operator upgrade restarted tenant pods")
    w = Writer("upgraded")
    w.start()
    wait_for("acknowledged writes", lambda: len(w.acked) >= 20, 60)
    patch_tenant({"spec": {"image": f"{SERVER_IMAGE}:{TAG2}"}})
    wait_for("server pod on the new tag", lambda: all(
        p["spec"]["containers"][0]["image"] == f"{SERVER_IMAGE}:{TAG2}" for p in tenant_pods()), 240, interval=2)
    wait_tenant_ready(timeout=300)
    n0 = len(w.acked)
    wait_for("writes after the upgrade", lambda: len(w.acked) >= n0 + 20, 120)
    w.stop()
    rev = helm("history", RELEASE, "-n", OP_NS, "--max", "1", "-o", "json")
    return f"operator {img} (revision {json.loads(rev)[-1]['revision']}), tenant pods kept; server {SERVER_IMAGE}:{TAG2}: " + w.verify(allow_refused=True)


@scenario
def uninstall_keeps_volumes():
    """Delete the tenant and uninstall the chart: the PVCs (Retain) and the CRD stay; re-installing
    and re-creating the tenant finds the data."""
    base = ACC.service()
    before = int(sql_rows(base, f"SELECT count() AS c FROM {DB}_autogen_lp")[0]["c"])
    pvcs = sorted(p["metadata"]["name"] for p in kj("-n", NS, "get", "pvc")["items"])
    k("-n", NS, "delete", "ingesttenant", TENANT, "--timeout=120s")
    wait_for("tenant pods gone", lambda: not tenant_pods(), 180, interval=2)
    helm("uninstall", RELEASE, "-n", OP_NS, "--wait", "--timeout", "3m")
    after = sorted(p["metadata"]["name"] for p in kj("-n", NS, "get", "pvc")["items"])
    if after != pvcs or not pvcs:
        raise Fail(f"PVCs before {pvcs}, after {after}")
    if not kget("crd", "ingesttenants.sluice.dev", ns=OP_NS):
        raise Fail("the CRD went with the release")
    owned = [p["metadata"]["name"] for p in kj("-n", NS, "get", "pvc")["items"] if p["metadata"].get("ownerReferences")]
    if owned:
        raise Fail(f"retained PVCs still have owners (garbage collection would delete them): {owned}")
    helm("install", RELEASE, CHART, "-n", OP_NS, "--wait", "--timeout", "5m", *helm_values(TAG2))
    apply(tenant_manifest(image=f"{SERVER_IMAGE}:{TAG2}"))
    ACC.reset()  # a new Service, a new ClusterIP
    wait_tenant_ready(timeout=300)
    # kube-proxy may need a moment for the new Service
    again = wait_for("a query through the new Service", lambda: sql_rows(
        ACC.service(), f"SELECT count() AS c FROM {DB}_autogen_lp"), 60)
    again = int(again[0]["c"])
    if again != before:
        raise Fail(f"re-created tenant sees {again} rows of {before}")
    return f"PVCs {pvcs} and the CRD survived uninstall; re-created tenant reads its {before} rows"


def cleanup():
    log("cleanup: tenant, namespace, release, volumes")
    ACC.reset()
    sh(KUBECTL + ["-n", NS, "patch", "ingesttenant", TENANT, "--type", "merge", "-p",
                  '{"spec":{"storage":{"reclaimPolicy":"Delete"}}}'], check=False)
    sh(KUBECTL + ["-n", NS, "delete", "ingesttenant", "--all", "--timeout=120s"], check=False, timeout=150)
    # Without a running operator the finalizer cannot run: drop it so the namespace can go.
    for t in (kj("-n", NS, "get", "ingesttenant", check=False) or {}).get("items", []):
        sh(KUBECTL + ["-n", NS, "patch", "ingesttenant", t["metadata"]["name"], "--type", "json", "-p",
                      '[{"op":"remove","path":"/metadata/finalizers"}]'], check=False)
    sh(HELM + ["uninstall", RELEASE, "-n", OP_NS, "--wait", "--timeout", "2m"], check=False, timeout=150)
    sh(KUBECTL + ["delete", "namespace", NS, OP_NS, "--timeout=180s"], check=False, timeout=200)
    for crd in INSTALLED_CRDS:
        sh(KUBECTL + ["delete", "crd", crd, "--timeout=60s"], check=False, timeout=90)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="comma-separated scenario names (they still need what earlier ones set up)")
    ap.add_argument("--keep", action="store_true", help="leave everything in place")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for s in SCENARIOS:
            print(f"{s.__name__:40} {s.__doc__.strip().splitlines()[0]}")
        return 0
    chosen = [s for s in SCENARIOS if not a.only or s.__name__ in a.only.split(",")]
    log(f"access {ACCESS}; kill via {'SIGKILL (' + ' '.join(CTR) + ')' if CTR else 'forced delete'}; "
        f"images {OP_IMAGE}:{TAG}/{TAG2}, {SERVER_IMAGE}:{TAG}/{TAG2}")
    # A previous run that was interrupted: start clean.
    if not a.only and (kget("namespace", NS, ns="default") or sh(HELM + ["status", RELEASE, "-n", OP_NS], check=False).returncode == 0):
        cleanup()
    results, t_all, failed = [], time.monotonic(), None
    for s in chosen:
        log(f"--- {s.__name__}: {s.__doc__.strip().splitlines()[0]}")
        t0 = time.monotonic()
        try:
            detail = s()
            outcome = "ok"
        except Exception as e:  # noqa: BLE001 - report every failure the same way
            detail, outcome, failed = f"{type(e).__name__}: {e}", "FAILED", s.__name__
            if not isinstance(e, Fail):
                traceback.print_exc()
        dt = time.monotonic() - t0
        results.append({"scenario": s.__name__, "seconds": round(dt, 1), "outcome": outcome, "detail": detail})
        log(f"{outcome} {s.__name__} ({dt:.1f}s): {detail}")
        if failed:
            diagnostics()
            break
    total = time.monotonic() - t_all
    print("\nscenario                                  seconds  outcome")
    for r in results:
        print(f"{r['scenario']:40} {r['seconds']:8.1f}  {r['outcome']}")
    print(f"{'total':40} {total:8.1f}")
    if os.environ.get("SLUICE_E2E_RESULTS"):
        json.dump({"results": results, "seconds": round(total, 1)}, open(os.environ["SLUICE_E2E_RESULTS"], "w"), indent=2)
    if not a.keep:
        cleanup()
    ACC.reset()
    return 1 if failed else 0


def diagnostics():
    for cmd in (["-n", NS, "get", "ingesttenant,statefulset,pods,pvc", "-o", "wide"],
                ["-n", NS, "describe", "ingesttenant", TENANT],
                ["-n", OP_NS, "get", "pods", "-o", "wide"],
                ["-n", OP_NS, "logs", "-l", "app.kubernetes.io/name=sluice-operator", "--tail=40", "--prefix"],
                ["-n", NS, "logs", "-l", "app.kubernetes.io/name=sluice-server", "--tail=30", "--prefix"],
                ["-n", NS, "get", "events", "--sort-by=.lastTimestamp"]):
        r = sh(KUBECTL + cmd, check=False, timeout=60)
        print(f"$ kubectl {' '.join(cmd)}\n{r.stdout[-4000:]}{r.stderr[-1000:]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
