"""The knee autoscaler with real load."""
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
