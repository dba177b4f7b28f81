"""The knee autoscaler with real load: calibration, scale-out ahead of the load, steadiness,
scale-in through decommissioning, and exactness throughout."""
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.parse

from kube import *  # noqa: F401,F403
from tenant import *  # noqa: F401,F403
import timeline

MISSION = "knee"          # the autoscaled tenant
RAMP = "knee-ramp"        # a tenant of the same pods without autoscaling, for the ramp by hand
P95_TARGET_MS = 500
POINTS = 1000             # points per request, of the calibration and of the load
SEGMENT_S = 10            # the load runs as 10 s open-model steps, each on fresh connections
RISE_S, STEADY_S = 120, 120
MAX_REPLICAS = 4
HAND_RAMPS = 3            # ramps by hand at most, when the first is more than 25 % away
MEASUREMENT = "mission"


def sluice_load():
    """The load generator `cargo` built most recently (release or debug)."""
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    found = [os.path.join(target, p, "sluice-load") for p in ("release", "debug")]
    found = [p for p in found if os.access(p, os.X_OK)]
    if not found:
        raise Fail(f"no sluice-load under {target}: cargo build -p sluice-load")
    return max(found, key=os.path.getmtime)


def images_sluice_load():
    """The sluice-load build the images carry (`--debug` images: the debug one), so that the
    ramp by hand runs the calibration pod's own generator, not a faster one."""
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    profile = "debug" if "--debug" in os.environ.get("SLUICE_E2E_IMAGE_ARGS", "") else "release"
    path = os.path.join(target, profile, "sluice-load")
    return path if os.access(path, os.X_OK) else sluice_load()


def knee_manifest(name, autoscaling):
    """Pods limited to 300m of CPU: one pod's knee is well below what the node offers."""
    m = tenant_manifest(
        replicas=1,
        resources={"requests": {"cpu": "250m", "memory": "256Mi"},
                   "limits": {"cpu": "300m", "memory": "2Gi"}},
        storage={"size": "4Gi", "reclaimPolicy": "Delete", "scaleDownPolicy": "Delete",
                 **({"storageClassName": STORAGE_CLASS} if STORAGE_CLASS else {})})
    m["metadata"]["name"] = name
    if autoscaling:
        m["spec"]["scaling"] = {"minReplicas": 1, "maxReplicas": MAX_REPLICAS}
        m["spec"]["autoscaling"] = {
            "enabled": True, "p95Target": f"{P95_TARGET_MS}ms",
            "scaleDownWindow": "30s", "scaleDownCooldown": "30s",
            "calibration": {"payload": {"pointsPerRequest": POINTS}}}
    return m


def status_of(name):
    return (kget("ingesttenant", name) or {}).get("status") or {}


def ready_pods(name):
    return [p for p in tenant_pods(name) if pod_ready(p)]


def calibration_pod(name):
    pods = kj("-n", NS, "get", "pods", "-l",
              f"app.kubernetes.io/name=sluice-calibration,app.kubernetes.io/instance={name}")["items"]
    return pods[0] if pods else None


def hand_ramp_args(cal_pod, url):
    """The calibration's own ramp (its load container's arguments), aimed at `url`."""
    load = next(c for c in cal_pod["spec"]["containers"] if c["name"] == "sluice-load")
    args, out, skip = load["args"], [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("--url", "--summary", "--wait-ready", "--measurement"):
            skip = True
            continue
        out.append(a)
    return out + ["--url", url, "--measurement", "handramp"]


def segment(url, rate, path):
    """One 10 s open-model step at `rate` points/s through `url`, on fresh connections (so the
    Service spreads them over the pods Ready now); its report."""
    cmd = [sluice_load(), "--url", url, "--db", DB, "--measurement", MEASUREMENT,
           "--rate", str(int(rate)), "--duration", f"{SEGMENT_S}s", "--points", str(POINTS),
           "--series", "1000", "--fields", "5", "--connections", "48", "--spread",
           "--timeout", "10s", "--quiet", "--json", path]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=SEGMENT_S + 60)
    if r.returncode != 0:
        raise Fail(f"sluice-load failed ({r.returncode}): {r.stderr[-500:]}")
    with open(path) as f:
        return json.load(f)["steps"][0]


# Outcomes of a request: acknowledged (stored once), refused (never stored), in doubt (stored
# once or not at all): a timeout, a broken connection, a 5xx other than 503.
REFUSED = {"503", "connect"}


def in_doubt(step):
    return sum(n for k, n in step["errors_by_status"].items()
               if k not in REFUSED and not k.startswith("4"))


class Sampler(threading.Thread):
    """Every 4 s: spec.replicas, Ready pods, the knee, rate and p95 the operator reports (two
    kubectl calls: more often would take the node's CPU from the pods measured), and each pod's
    start-up (creation to Ready, by UID) once it is Ready: the pods added and removed during
    the mission are gone when it is judged."""

    def __init__(self, name, t0):
        super().__init__(daemon=True)
        self.name_, self.t0, self.samples, self.start_ups = name, t0, [], {}
        self.stop_ = threading.Event()

    def run(self):
        while not self.stop_.is_set():
            try:
                t = kget("ingesttenant", self.name_) or {}
                st = t.get("status") or {}
                pods = tenant_pods(self.name_)
                for p in pods:
                    s = pod_start_up_s(p)
                    if s is not None:  # the first Ready seen: a later one would be a readiness blip
                        self.start_ups.setdefault(p["metadata"]["name"] + "/" + p["metadata"]["uid"], s)
                self.samples.append({
                    "t": round(time.monotonic() - self.t0, 1),
                    "replicas": t.get("spec", {}).get("replicas"),
                    "ready": len([p for p in pods if pod_ready(p)]),
                    "knee": (st.get("knee") or {}).get("pointsPerSecond"),
                    "knee_source": (st.get("knee") or {}).get("source"),
                    "rate": st.get("rate"), "p95": st.get("p95"),
                    "last": (st.get("lastScaling") or {}).get("reason")})
            except Fail:
                pass
            self.stop_.wait(4)

    def stop(self):
        self.stop_.set()
        self.join(timeout=30)


def longest_breach(segments):
    """The longest run of consecutive load steps whose p95 was over the target, seconds."""
    longest = run = 0.0
    for s in segments:
        if s["p95_ms"] is not None and s["p95_ms"] > P95_TARGET_MS:
            run += s["t1"] - s["t0"]
            longest = max(longest, run)
        else:
            run = 0.0
    return longest


def pod_start_up_s(p):
    """How long pod `p` took from creation (which its volume's provisioning follows) to Ready,
    seconds; None while it is not Ready."""
    ready = next((c for c in p["status"].get("conditions", []) if c["type"] == "Ready"
                  and c["status"] == "True"), None)
    if not ready:
        return None
    return iso_seconds(ready["lastTransitionTime"]) - iso_seconds(p["metadata"]["creationTimestamp"])


def start_up_s(name):
    """The longest a pod of `name` there now took from creation to Ready, seconds."""
    return max((s for s in map(pod_start_up_s, tenant_pods(name)) if s is not None), default=0.0)


def iso_seconds(s):
    return time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def calibrate_and_ramp_by_hand():
    """Both tenants at once; the ramp by hand runs beside the calibration (the same conditions
    for both). Returns the calibrated knee, the hand ramp's, and what the calibration said."""
    apply(knee_manifest(RAMP, False))
    apply(knee_manifest(MISSION, True))
    cal = wait_for("the calibration pod", lambda: calibration_pod(MISSION), 120, interval=1)
    ramp_pod = wait_for(f"{RAMP}-0 Ready", lambda: (ready_pods(RAMP) or [None])[0], 240, interval=2)
    args = hand_ramp_args(cal, ACC.pod(ramp_pod))
    hand = ramp_by_hand(args)
    st = wait_for("the calibration's result", lambda: (
        (status_of(MISSION).get("calibration") or {}).get("phase") in ("Succeeded", "Failed")
        and status_of(MISSION)), 360, interval=3)
    c = st["calibration"]
    # One ramp of 10 s steps on a 300m pod varies by half from run to run: near its capacity a
    # step passes or fails by the burst of merging that lands in it (10,000-16,500 points/s on
    # the 2-vCPU VM, 21,000-22,500 in CI). Both ramps run their highest passing rate again
    # (`--confirm 3`) and let the majority of its runs decide, so one lucky or unlucky step no
    # longer sets either knee (a calibration of 22,500 against ramps by hand of 16,500, 15,000
    # and 15,000 failed the run of 2026-11-30 05:42).
    # When the first ramp by hand is more than 25 % away,
    # up to two more run, alone, and the calibration is judged against the nearest; all are
    # reported.
    knee = float(c.get("pointsPerSecond") or 0)
    ramps = [hand]
    while len(ramps) < HAND_RAMPS and not near(knee, ramps):
        ramps.append(ramp_by_hand(args))
    hand = min((r for r in ramps if r.get("knee_pps")), default=hand,
               key=lambda r: abs(knee - r["knee_pps"]))
    hand["other_ramps_pps"] = [r.get("knee_pps") for r in ramps if r is not hand]
    k("-n", NS, "delete", "ingesttenant", RAMP, "--wait=false")
    if c["phase"] != "Succeeded":
        raise Fail(f"calibration failed: {c.get('message')}")
    if calibration_pod(MISSION) and not calibration_pod(MISSION)["metadata"].get("deletionTimestamp"):
        raise Fail("the calibration pod is still there after it reported")
    for reason in ("Calibrating", "Calibrated"):
        if decommissioned_events(reason, MISSION) < 1:
            raise Fail(f"no {reason} Event")
    knee = wait_for("status.knee from the calibration", lambda: (
        (status_of(MISSION).get("knee") or {}).get("source") == "calibration" and status_of(MISSION)["knee"]),
        60, interval=2)
    if not hand.get("knee_pps"):
        raise Fail(f"the ramp by hand found no knee: {hand.get('steps')}")
    return c, knee, hand


def short_steps(report):
    """A ramp's steps as `rate/p95 ok|failed`, for a failure's message."""
    return ", ".join(f"{s['offered_pps']:.0f}/{s['p95_ms'] or 0:.0f} {'ok' if s.get('pass') else 'failed'}"
                     for s in report.get("steps", []))


def near(knee, ramps):
    """Whether `knee` is within 25 % of one of the ramps by hand that found a knee."""
    return any(r.get("knee_pps") and abs(knee - r["knee_pps"]) <= 0.25 * r["knee_pps"] for r in ramps)


def ramp_by_hand(args):
    """The calibration's ramp run from here; its report."""
    out = tempfile.mktemp(suffix=".json")
    log(f"    ramp by hand: sluice-load {' '.join(args)}")
    r = subprocess.run([images_sluice_load(), "--json", out, *args], capture_output=True, text=True,
                       timeout=420)
    if r.returncode != 0:
        raise Fail(f"the ramp by hand failed: {r.stderr[-500:]}")
    print("    " + r.stdout.replace("\n", "\n    ").rstrip(), flush=True)
    with open(out) as f:
        return json.load(f)


def out_dir():
    d = os.environ.get("SLUICE_E2E_TIMELINE_DIR") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "e2e")
    os.makedirs(d, exist_ok=True)
    return d


class Mission:
    """The load and what was seen of it: 10 s steps through the Service, rising from a third
    of the calibrated knee to 2.5 times it, steady, then back to a third until one pod is left."""

    def __init__(self, knee):
        self.knee, self.low, self.high = knee, knee / 3, 2.5 * knee
        self.base = ACC.service(MISSION)
        self.tmp = tempfile.mkdtemp()
        self.t0 = time.monotonic()
        self.sampler = Sampler(MISSION, self.t0)
        self.segments = []
        self.steady = [None, None]
        self.back_to_one = None

    def now(self):
        return time.monotonic() - self.t0

    def step(self, rate, phase):
        s0 = self.now()
        r = segment(self.base, rate, os.path.join(self.tmp, f"{len(self.segments)}.json"))
        self.segments.append({"t0": s0, "t1": self.now(), "phase": phase, "offered_pps": r["offered_pps"],
                              "acked_pps": r["achieved_pps"], "p95_ms": r["p95_ms"],
                              "acked_points": r["ok"] * POINTS, "doubt_points": in_doubt(r) * POINTS,
                              "errors": r["errors_by_status"], "dropped": r["dropped"]})

    def run(self):
        self.sampler.start()
        try:
            rise = RISE_S // SEGMENT_S
            for i in range(rise):
                self.step(self.low + (self.high - self.low) * i / (rise - 1), "rise")
            self.steady[0] = self.now()
            for _ in range(STEADY_S // SEGMENT_S):
                self.step(self.high, "steady")
            self.steady[1] = self.now()
            # The load falls back, and runs on until the autoscaler is back at one pod.
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                self.step(self.low, "fall")
                t = kget("ingesttenant", MISSION) or {}
                if t.get("spec", {}).get("replicas") == 1 and len(tenant_pods(MISSION)) == 1 \
                        and len(ready_pods(MISSION)) == 1:
                    self.back_to_one = self.now()
                    break
        finally:
            self.sampler.stop()

    def knee_moves(self):
        """Where the reported knee moved by more than a tenth: (t, replicas, from, to, source)."""
        moves, last = [], None
        for x in self.sampler.samples:
            k = x.get("knee")
            if k is None:
                continue
            if last is None or abs(k - last) > 0.1 * last:
                moves.append((x["t"], x["replicas"], last, k, x.get("knee_source")))
                last = k
        return moves

    def changes(self):
        s = self.sampler.samples
        return [(b["t"], a["replicas"], b["replicas"]) for a, b in zip(s, s[1:]) if b["replicas"] != a["replicas"]]

    def save(self, extra):
        """The numbers (JSON) and the picture (SVG), whatever the outcome."""
        d = out_dir()
        record = {"p95_target_ms": P95_TARGET_MS, "knee": self.knee, "segments": self.segments,
                  "samples": self.sampler.samples, "changes": self.changes(), "steady": self.steady,
                  "back_to_one": self.back_to_one, "start_ups_s": self.sampler.start_ups, **extra}
        with open(os.path.join(d, "knee-autoscaling.json"), "w") as f:
            json.dump(record, f, indent=1)
        marks = [(0, "rise")]
        if self.steady[0] is not None:
            marks.append((self.steady[0], "steady at 2.5 x knee"))
        if self.steady[1] is not None:
            marks.append((self.steady[1], "falls back to a third"))
        timeline.write_svg(
            os.path.join(d, "knee-autoscaling.svg"), self.segments, self.sampler.samples, self.knee,
            P95_TARGET_MS, f"Knee autoscaling: pods of 300m CPU, calibrated knee "
            f"{self.knee / 1000:.1f}k points/s per pod", phases=marks)
        log(f"    timeline: {d}/knee-autoscaling.svg (.json)")


def stored_points(base):
    """Points of the load across the tenant: one read through its Service, every pod's share."""
    rows = tenant_sql(f"SELECT count() AS c FROM {DB}_autogen_{MEASUREMENT}", "SELECT sum(c) AS c FROM tenant",
                      base=base)
    return int(rows[0]["c"])


def influxql_count_through(base):
    """The load's points as InfluxQL counts them through the Service."""
    st, body = req("GET", base, "/query?" + urllib.parse.urlencode(
        {"db": DB, "q": f'SELECT count("f0") FROM "{MEASUREMENT}"'}))
    res = json.loads(body)["results"][0] if st == 200 else {}
    if "series" not in res:
        raise Fail(f"InfluxQL count through the Service: {st} {body[:200]!r}")
    return res["series"][0]["values"][0][1]


def judge(m):
    """The mission's claims about the load; Fail on the first that does not hold."""
    changes = m.changes()
    ups = [ch for ch in changes if ch[2] > ch[1]]
    downs = [(a, b) for _, a, b in changes if b < a]
    top = max((s["replicas"] or 0) for s in m.sampler.samples)
    if top < 3:
        raise Fail(f"replicas never passed 2 under 2.5 x one pod's knee: {changes}")
    if downs != [(r, r - 1) for r in range(top, 1, -1)]:
        raise Fail(f"scale-in was not one pod at a time down to 1: {changes}")
    in_steady = [ch for ch in changes if m.steady[0] <= ch[0] <= m.steady[1]]
    if len(in_steady) > 1:
        raise Fail(f"{len(in_steady)} scaling events under steady load: {in_steady}")
    # The slowest start-up of any pod of the mission: a scale-up helps only once its pod is
    # Ready, and a new pod's volume is provisioned after the pod is created (10-25 s here).
    startup = max(m.sampler.start_ups.values(), default=0.0) or start_up_s(MISSION) or 30.0
    breach, allowed = longest_breach(m.segments), 10 + startup + SEGMENT_S
    if breach > allowed:
        over = [(round(s["t0"]), round(s["offered_pps"]), round(s["p95_ms"])) for s in m.segments
                if s["p95_ms"] is not None and s["p95_ms"] > P95_TARGET_MS]
        raise Fail(f"p95 stayed over {P95_TARGET_MS} ms for {breach:.0f} s (allowed: a 10 s sampling "
                   f"window + a {startup:.0f} s start-up + one {SEGMENT_S} s step); steps over it "
                   f"(start s, offered points/s, p95 ms): {over}; replicas {changes}; start-ups "
                   f"{ {k.split('/')[0]: round(v) for k, v in m.sampler.start_ups.items()} }")
    if decommissioned_events("Decommissioned", MISSION) < top - 1:
        raise Fail(f"scale-in from {top} without {top - 1} Decommissioned Events")
    return {"ups": ups, "in_steady": in_steady, "start_up_s": startup, "longest_breach_s": breach,
            "allowed_s": allowed}


def calibrated_knee_scales_out_before_p95_breaks_and_back_in_exactly():
    """Pods limited to 300m of CPU, 1 to 4 replicas: the calibration's knee is within 25 % of a
    ramp by hand against such a pod; an open-model load through the Service rising from a third
    of that knee to 2.5 times it makes the autoscaler add pods before p95 stays over its target
    for longer than a sampling window and a pod's start-up; steady load changes replicas at most
    once; when the load falls back, replicas go down one at a time through decommissioning;
    every acknowledged point is stored, and read through the Service, exactly once."""
    try:
        c, knee_status, hand = calibrate_and_ramp_by_hand()
        knee = float(c["pointsPerSecond"])
        off = abs(knee - hand["knee_pps"]) / hand["knee_pps"]
        log(f"    calibration: {knee:.0f} points/s per pod ({c.get('message')}); by hand: "
            f"{hand['knee_pps']:.0f} ({off:.0%} apart; other ramps by hand: "
            f"{hand.get('other_ramps_pps') or 'none'}); status.knee {knee_status}")
        if off > 0.25:
            raise Fail(f"calibrated knee {knee:.0f} is {off:.0%} from the ramp by hand ({hand['knee_pps']:.0f}); "
                       f"calibration: {c.get('message')}; by hand: {short_steps(hand)}; other ramps by hand: "
                       f"{hand.get('other_ramps_pps') or 'none'}")
        wait_for(f"{MISSION}: one Ready pod", lambda: len(ready_pods(MISSION)) == 1, 240, interval=2)
        m = Mission(knee)
        extra = {"knee_by_hand": hand["knee_pps"], "apart": round(off, 3), "calibration": c,
                 "other_ramps_by_hand": hand.get("other_ramps_pps"),
                 "hand_steps": hand["steps"]}
        try:
            m.run()
            if m.back_to_one is None:
                raise Fail(f"replicas did not come back to 1 within 300 s of the load falling: "
                           f"{m.sampler.samples[-3:]}; the knee's moves: {m.knee_moves()}")
            verdict = judge(m)
            extra.update(verdict)
            # Exactness, through the Service: every acknowledged point once.
            acked = sum(s["acked_points"] for s in m.segments)
            doubt = sum(s["doubt_points"] for s in m.segments)
            extra.update({"acknowledged": acked, "in_doubt": doubt})
            wait_for(f"all {acked} acknowledged points readable", lambda: stored_points(m.base) >= acked,
                     180, interval=3)
            time.sleep(3)
            stored = stored_points(m.base)
            extra["stored"] = stored
            if not acked <= stored <= acked + doubt:
                raise Fail(f"{stored} points stored, {acked} acknowledged and {doubt} in doubt")
            read = influxql_count_through(m.base)
            if read != stored:
                raise Fail(f"InfluxQL through the Service counts {read}, the tenant holds {stored}")
        finally:
            m.save(extra)
        crossing = next((s["t0"] for s in m.segments if s["offered_pps"] > knee), None)
        breaching = [(round(s["t0"]), round(s["p95_ms"])) for s in m.segments
                     if s["p95_ms"] is not None and s["p95_ms"] > P95_TARGET_MS]
        first_up = verdict["ups"][0][0] if verdict["ups"] else None
        return (f"knee {knee:.0f} (calibrated) vs {hand['knee_pps']:.0f} (by hand), {off:.0%} apart "
                f"(other ramps by hand: {hand.get('other_ramps_pps') or 'none'}); "
                f"load {m.low:.0f} -> {m.high:.0f} points/s; offered passed one pod's knee at "
                f"{crossing and round(crossing)} s, first scale-up seen at {first_up} s; replicas "
                f"{[(round(t), a, b) for t, a, b in m.changes()]}; p95 over {P95_TARGET_MS} ms in "
                f"{breaching} (longest {verdict['longest_breach_s']:.0f} s, allowed "
                f"{verdict['allowed_s']:.0f} s); {len(verdict['in_steady'])} change(s) under steady load; "
                f"{acked} points acknowledged, {doubt} in doubt, {stored} stored and read once through "
                f"the Service")
    finally:
        k("-n", NS, "delete", "ingesttenant", MISSION, RAMP, "--wait=true", "--timeout=180s", check=False)


# In every run since 2026-11-26 (two clean runs in a row once a hand-off's receiving pod no
# longer counts; see e2e/README.md). About nine minutes of the suite.
scenario(calibrated_knee_scales_out_before_p95_breaks_and_back_in_exactly)
