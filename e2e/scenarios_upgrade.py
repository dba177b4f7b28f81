"""Upgrades and uninstall."""
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
