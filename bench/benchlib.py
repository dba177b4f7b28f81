"""Shared helpers of the bench/ scripts: paths, free ports, starting and stopping servers we
started (by pid, never by name), /proc accounting, sluice-load runs, machine-load notes.

Everything talks to 127.0.0.1 only. Every wait is bounded.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOME = os.path.expanduser("~")
CACHE = os.environ.get("SLUICE_CACHE") or os.path.join(HOME, ".cache", "sluice")
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(CACHE, "target")
BIN = os.path.join(CACHE, "bin")
PEERS = os.path.join(CACHE, "peers")
SERVER = os.path.join(TARGET, "release", "sluice-server")
LOAD = os.path.join(TARGET, "release", "sluice-load")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# machine load


def loadavg():
    with open("/proc/loadavg") as f:
        return tuple(float(x) for x in f.read().split()[:3])


def cpu_pressure():
    """`some avg10`, `some avg60` of /proc/pressure/cpu (percent), or None."""
    try:
        with open("/proc/pressure/cpu") as f:
            line = f.readline().split()
        kv = dict(x.split("=") for x in line[1:])
        return float(kv["avg10"]), float(kv["avg60"])
    except (OSError, KeyError, ValueError, IndexError):
        return None


def machine_note():
    la = loadavg()
    p = cpu_pressure()
    s = f"load {la[0]:.1f}/{la[1]:.1f}/{la[2]:.1f}"
    if p:
        s += f", cpu psi some avg10={p[0]:.0f}% avg60={p[1]:.0f}%"
    return s


def machine_sample():
    la = loadavg()
    p = cpu_pressure() or (None, None)
    return {"load1": la[0], "load5": la[1], "psi_some_avg10": p[0], "psi_some_avg60": p[1]}


# ---------------------------------------------------------------------------------------------
# binaries


def ensure_release(build=True):
    """The release sluice-server and sluice-load; built (nice, -j1) when missing and allowed."""
    missing = [p for p in (SERVER, LOAD) if not os.access(p, os.X_OK)]
    if not missing:
        return True
    if not build:
        log(f"missing release binaries: {' '.join(missing)}")
        return False
    log("building the release binaries (nice, -j1): cargo build --release -p sluice-server -p sluice-load")
    env = dict(os.environ, CARGO_TARGET_DIR=TARGET)
    env["PATH"] = os.path.join(HOME, ".cargo", "bin") + os.pathsep + env.get("PATH", "")
    r = subprocess.run(
        ["nice", "-n", "10", "cargo", "build", "--release", "--locked", "-j1",
         "-p", "sluice-server", "-p", "sluice-load"],
        cwd=ROOT, env=env, timeout=3 * 3600)
    return r.returncode == 0 and all(os.access(p, os.X_OK) for p in (SERVER, LOAD))


def binary_note(path):
    try:
        st = os.stat(path)
        return time.strftime("%Y-%m-%d %H:%M", time.gmtime(st.st_mtime)) + "Z"
    except OSError:
        return "?"


def git_rev():
    try:
        r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return r.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "?"


# ---------------------------------------------------------------------------------------------
# ports, HTTP


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=10, headers=None):
    """(status, body bytes); status 0 when the connection failed."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError, TimeoutError):
        return 0, b""


def wait_http(url, ok=(200, 204), timeout=120, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        st, _ = http("GET", url, timeout=2)
        if st in ok:
            return True
        time.sleep(0.5)
    return False


# ---------------------------------------------------------------------------------------------
# processes we start


class Server:
    """A server process started by us, in its own session, logs to files. Stopped by pid."""

    def __init__(self, name, argv, env=None, cwd=None, logdir="."):
        self.name = name
        self.argv = argv
        self.out = open(os.path.join(logdir, f"{name}.log"), "wb")
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=self.out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.pid = self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def cpu_seconds(self):
        """utime + stime of the process (all its threads), in seconds."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                raw = f.read()
        except OSError:
            return None
        fields = raw[raw.rindex(")") + 2:].split()
        # fields[0] is field 3 (state); utime is field 14, stime field 15
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def thread_cpu(self):
        """utime + stime per thread name (threads of one name summed), in seconds: which part of
        the server spent the CPU (e.g. chDB's background merges run in `MergeMutate` threads)."""
        out = {}
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return out
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/stat") as f:
                    raw = f.read()
            except OSError:
                continue
            name = raw[raw.index("(") + 1:raw.rindex(")")]
            fields = raw[raw.rindex(")") + 2:].split()
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
        return out

    def status(self, key):
        """A /proc/<pid>/status value in KiB (VmHWM, VmRSS), or None."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log(f"{self.name}: no exit {timeout}s after SIGTERM, SIGKILL (pid {self.pid})")
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=30)
        self.out.close()
        return self.proc.returncode


def settle(server, max_seconds, idle_cores=0.05, extra=None):
    """Waits until the server's CPU use stays under `idle_cores` for two 1 s windows in a row
    (background flushes and merges finish) and `extra()` (if given) is true; at most
    `max_seconds`. Returns the seconds waited."""
    start = time.time()
    quiet = 0
    last = server.cpu_seconds()
    while time.time() - start < max_seconds:
        time.sleep(1.0)
        now = server.cpu_seconds()
        if now is None or last is None:
            break
        quiet = quiet + 1 if now - last < idle_cores else 0
        last = now
        if quiet >= 2 and (extra is None or extra()):
            break
    return time.time() - start


def sluice_metric(base, name):
    """Sum of a sluice Prometheus metric's samples whose name (with labels) starts with `name`."""
    st, body = http("GET", base + "/metrics", timeout=10)
    if st != 200:
        return None
    total = None
    for line in body.decode(errors="replace").splitlines():
        if line.startswith(name):
            rest = line[len(name):]
            if rest[:1] in (" ", "{"):
                total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
    return total


def wait_drained(base, max_s, poll=0.25):
    """Waits (at most `max_s`) until sluice's WAL backlog is flushed into chDB; True when it is."""
    deadline = time.time() + max_s
    while time.time() < deadline:
        if sluice_metric(base, "sluice_wal_backlog_points") == 0:
            return True
        time.sleep(poll)
    return False


def sluice_sql(base, q, timeout=30):
    st, body = http("POST", base + "/sql", body=q.encode(), timeout=timeout)
    return st, body.decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# sluice-load


def pinned(argv, cpus):
    """`argv` run on the CPUs `cpus` only (taskset's list syntax, "1" or "0-1"), or unchanged.

    A server pinned to one core is a pod with a one-CPU limit: the threads it sizes from the
    CPUs it may use (its runtime's, the engine's) see one, and the load generator pinned to
    the other core does not take the server's time."""
    return ["taskset", "-c", cpus] + argv if cpus else argv


def own_cgroup(controller):
    """(kind, directory) of this process's cgroup for `controller` ("memory", "cpu"): a v1
    hierarchy of its own if mounted, else the v2 unified one ("v1"|"v2", path)."""
    with open("/proc/self/cgroup") as f:
        lines = [line.split(":", 2) for line in f.read().splitlines()]
    for _, controllers, path in lines:
        names = controllers.split(",")
        if controller in names:
            for mount in (f"/sys/fs/cgroup/{controller}", f"/sys/fs/cgroup/{controllers}"):
                if os.path.isdir(mount):
                    return "v1", os.path.join(mount, path.lstrip("/"))
            raise RuntimeError(f"no cgroup v1 {controller} hierarchy under /sys/fs/cgroup")
    for _, controllers, path in lines:
        if controllers == "":
            return "v2", os.path.join("/sys/fs/cgroup", path.lstrip("/"))
    raise RuntimeError(f"no {controller} cgroup")


class CpuLimit:
    """A child CPU cgroup of this process's own, allowed `cpus` CPUs (a pod's CPU limit on
    Kubernetes): processes added to it run under that quota until it is released. cgroup v1
    (`cpu.cfs_quota_us`, as on this VM as root) or v2 (`cpu.max`, with `+cpu` in the parent's
    `cgroup.subtree_control`). The period is 10 ms, so that a query throttled for its quota
    waits milliseconds, not the kernel's default 100 ms period."""

    PERIOD_US = 10_000

    def __init__(self, name, cpus):
        self.kind, self.parent = own_cgroup("cpu")
        self.path = os.path.join(self.parent, name)
        os.makedirs(self.path, exist_ok=True)
        quota = max(1000, int(cpus * self.PERIOD_US))
        if self.kind == "v1":
            self._write(self.path, "cpu.cfs_period_us", str(self.PERIOD_US))
            self._write(self.path, "cpu.cfs_quota_us", str(quota))
        else:
            self._write(self.path, "cpu.max", f"{quota} {self.PERIOD_US}")
        self.pids = []

    @staticmethod
    def _write(directory, file, value):
        with open(os.path.join(directory, file), "w") as f:
            f.write(value)

    def add(self, pid):
        """Moves process `pid` (every thread of it) into the cgroup."""
        self._write(self.path, "cgroup.procs", str(pid))
        self.pids.append(pid)

    def throttled_s(self):
        """Seconds the cgroup's processes waited for their quota so far."""
        try:
            with open(os.path.join(self.path, "cpu.stat")) as f:
                stat = dict(line.split() for line in f if line.strip())
        except OSError:
            return None
        if "throttled_time" in stat:
            return int(stat["throttled_time"]) / 1e9
        return int(stat.get("throttled_usec", 0)) / 1e6

    def release(self):
        """Moves the processes back to the parent cgroup and removes this one."""
        for pid in self.pids:
            try:
                self._write(self.parent, "cgroup.procs", str(pid))
            except OSError:
                pass  # the process is gone
        for _ in range(20):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.25)


def run_load(args, json_path, log_path, timeout, cpus=None):
    """Runs sluice-load with `args` (plus --json, --quiet); returns the parsed JSON or None."""
    argv = pinned([LOAD] + args + ["--json", json_path, "--quiet"], cpus)
    with open(log_path, "ab") as out:
        out.write(("$ " + " ".join(argv) + "\n").encode())
        out.flush()
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"sluice-load: over {timeout}s, stopping it (pid {p.pid})")
            os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
    try:
        with open(json_path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def parse_rate(text):
    """`200k`, `1.5M`, `3G`, `500` -> float."""
    t = text.strip()
    mult = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}.get(t[-1:], None)
    return float(t[:-1]) * mult if mult else float(t)


def parse_secs(text):
    t = text.strip()
    for suf, m in (("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if t.endswith(suf):
            return float(t[: -len(suf)]) * m
    return float(t)


def fmt_int(x):
    return "-" if x is None else f"{x:,.0f}"


def fmt_num(x, nd=1):
    return "-" if x is None else f"{x:,.{nd}f}"


def table(headers, rows, align=None):
    """A Markdown table (also readable on a terminal)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    align = align or ["l"] + ["r"] * (len(headers) - 1)

    def line(vals):
        out = []
        for v, w, a in zip(vals, widths, align):
            out.append(v.rjust(w) if a == "r" else v.ljust(w))
        return "| " + " | ".join(out) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2))
                         for w, a in zip(widths, align)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in cells])


def make_workdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("SLUICE_BENCH_TMP") or None)


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)
