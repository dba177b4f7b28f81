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

from kube import *  # noqa: F401,F403
from tenant import *  # noqa: F401,F403
# The scenarios register themselves in the order these modules are imported.
import scenarios_install  # noqa: F401,E402
import scenarios_rollouts  # noqa: F401,E402
import scenarios_scale_down  # noqa: F401,E402
import scenarios_autoscaling  # noqa: F401,E402
import scenarios_upgrade  # noqa: F401,E402


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
    # Last, where a CI log's tail shows it: why the scenario failed.
    for r in results:
        if r["outcome"] != "ok":
            print(f"\n{r['scenario']} failed: {r['detail']}")
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
