"""The tenant side of the e2e suite: HTTP to the tenant's Service and pods (directly or through
port-forwards), writes and reads, the tenant's manifest and readiness, a writer that checks
exactness, killing a pod, and counting Events."""
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

from kube import *  # noqa: F401,F403 - the suite's shared vocabulary


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


def kill_pod(pod, running_only=False):
    """SIGKILL the server process through the node's containerd; else a forced delete. With
    `running_only`, None when the process had already exited (a pod done with its hand-off)."""
    _, _, cid = pod_state(pod)
    if CTR and cid:
        r = sh(CTR + ["task", "kill", "--signal", "SIGKILL", cid.split("://", 1)[-1]], check=not running_only)
        if r.returncode != 0:
            if "no running task" in r.stderr:
                return None
            raise Fail(f"SIGKILL of {pod['metadata']['name']} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        return "SIGKILL"
    k("-n", NS, "delete", "pod", pod["metadata"]["name"], "--grace-period=0", "--force", "--wait=false")
    return "forced delete"


def influxql_count(measurement):
    row = influxql(f'SELECT count("i") FROM "{measurement}" WHERE time > now() - 1d')
    return row[0]["values"][0][1] if row else 0


def decommissioned_events(reason="Decommissioned", name=TENANT):
    """How many times the operator reported `reason` for tenant `name` (a repeated Event counts
    in its series); by default, pods emptied."""
    return sum((e.get("series") or {}).get("count", 1)
               for e in kj("-n", NS, "get", "events.events.k8s.io")["items"]
               if e.get("reason") == reason and (e.get("regarding") or {}).get("name") == name)
