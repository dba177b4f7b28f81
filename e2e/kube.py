"""The cluster side of the e2e suite: the environment it runs in (commands, images, names),
kubectl and helm, bounded waits, and the registry of scenarios (in the order they run: later
ones depend on the state earlier ones leave)."""
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


SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


def helm_values(tag):
    return ["--set", f"image.repository={OP_IMAGE}", "--set", f"image.tag={tag}",
            "--set", f"serverImage.repository={SERVER_IMAGE}", "--set", f"serverImage.tag={tag}",
            "--set", f"operator.watchNamespace={NS}", "--set", f"test.image={TEST_IMAGE}"]
