"""The autoscaling scenario's timeline as an SVG: what was offered and acknowledged against the
capacity the replicas had (replicas x one pod's knee), and p95 against its target with the
replica count, over the seconds of the load. Standard library only."""

from xml.sax.saxutils import escape

W, H = 960, 560
LEFT, RIGHT = 80, 70
TOP_PANEL = (50, 280)      # y range of the rates panel (top, bottom)
LOW_PANEL = (330, 500)     # y range of the p95 panel
COLORS = {"offered": "#1f77b4", "acked": "#2ca02c", "capacity": "#9467bd", "p95": "#d62728",
          "target": "#d62728", "replicas": "#ff7f0e", "knee": "#7f7f7f"}


def _scale(lo, hi, a, b):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) * (b - a) / span


def _nice(v):
    """A round number at least `v`, for an axis's top."""
    if v <= 0:
        return 1.0
    m = 10 ** (len(str(int(v))) - 1)
    for k in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if k * m >= v:
            return k * m
    return 10 * m


def _si(v):
    for d, s in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= d:
            return f"{v / d:g}{s}"
    return f"{v:g}"


def _poly(points, color, width=2, dash=None):
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{d} points="{pts}"/>'


def _steps(samples, fx, fy):
    """A step line through (t, v) samples."""
    out, last = [], None
    for t, v in samples:
        if last is not None:
            out.append((fx(t), fy(last)))
        out.append((fx(t), fy(v)))
        last = v
    return out


def _axis(x0, x1, y0, y1, fy, top, label, fmt, right=False):
    parts = []
    for i in range(6):
        v = top * i / 5
        y = fy(v)
        x = x1 if right else x0
        anchor = "start" if right else "end"
        dx = 6 if right else -6
        parts.append(f'<line x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>' if not right else "")
        parts.append(f'<text x="{x + dx}" y="{y + 4:.1f}" text-anchor="{anchor}" font-size="11">{fmt(v)}</text>')
    xl = x1 + 55 if right else x0 - 62
    parts.append(f'<text transform="translate({xl},{(y0 + y1) / 2}) rotate(-90)" text-anchor="middle" '
                 f'font-size="12">{escape(label)}</text>')
    return parts


def write_svg(path, segments, samples, knee_pps, p95_target_ms, title, phases=()):
    """segments: dicts with t0, t1 (s), offered_pps, acked_pps, p95_ms; samples: dicts with t,
    replicas, ready; phases: (t, label) marks."""
    t_end = max([s["t1"] for s in segments] + [s["t"] for s in samples] + [1.0])
    fx = _scale(0, t_end, LEFT, W - RIGHT)
    cap = [(s["t"], s["ready"] * knee_pps) for s in samples]
    rate_top = _nice(max([s["offered_pps"] for s in segments] + [c for _, c in cap] + [1.0]) * 1.05)
    fr = _scale(0, rate_top, TOP_PANEL[1], TOP_PANEL[0])
    p95s = [s["p95_ms"] for s in segments if s["p95_ms"] is not None]
    p95_top = _nice(min(max(p95s + [p95_target_ms]) * 1.1, 4 * p95_target_ms))
    fp = _scale(0, p95_top, LOW_PANEL[1], LOW_PANEL[0])
    rep_top = max([s["replicas"] for s in samples] + [1]) + 1
    frep = _scale(0, rep_top, LOW_PANEL[1], LOW_PANEL[0])
    mid = lambda s: (s["t0"] + s["t1"]) / 2  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'font-family="sans-serif">', f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="24" text-anchor="middle" font-size="15">{escape(title)}</text>']
    for y0, y1 in (TOP_PANEL, LOW_PANEL):
        out.append(f'<rect x="{LEFT}" y="{y0}" width="{W - LEFT - RIGHT}" height="{y1 - y0}" '
                   f'fill="none" stroke="#999"/>')
    out += _axis(LEFT, W - RIGHT, *TOP_PANEL, fr, rate_top, "points/s", _si)
    out += _axis(LEFT, W - RIGHT, *LOW_PANEL, fp, p95_top, "p95 write latency, ms", lambda v: f"{v:g}")
    out += _axis(LEFT, W - RIGHT, *LOW_PANEL, frep, rep_top, "replicas", lambda v: f"{v:g}", right=True)
    for i in range(0, int(t_end) + 1, 30):
        x = fx(i)
        out.append(f'<text x="{x:.1f}" y="{LOW_PANEL[1] + 16}" text-anchor="middle" font-size="11">{i}</text>')
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP_PANEL[0]}" y2="{LOW_PANEL[1]}" stroke="#f2f2f2"/>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{LOW_PANEL[1] + 34}" text-anchor="middle" '
               f'font-size="12">seconds since the load started</text>')
    for t, label in phases:
        x = fx(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP_PANEL[0]}" y2="{LOW_PANEL[1]}" stroke="#bbb" '
                   f'stroke-dasharray="2,3"/>')
        out.append(f'<text x="{x + 3:.1f}" y="{TOP_PANEL[0] + 12}" font-size="10" fill="#666">{escape(label)}</text>')
    out.append(_poly(_steps(cap, fx, fr), COLORS["capacity"], 2, "6,3"))
    out.append(_poly([(fx(0), fr(knee_pps)), (fx(t_end), fr(knee_pps))], COLORS["knee"], 1, "2,3"))
    out.append(_poly([(fx(mid(s)), fr(s["offered_pps"])) for s in segments], COLORS["offered"]))
    out.append(_poly([(fx(mid(s)), fr(s["acked_pps"])) for s in segments], COLORS["acked"], 2, "4,2"))
    out.append(_poly([(fx(0), fp(p95_target_ms)), (fx(t_end), fp(p95_target_ms))], COLORS["target"], 1, "5,4"))
    out.append(_poly(_steps([(s["t"], s["replicas"]) for s in samples], fx, frep), COLORS["replicas"], 2))
    for s in segments:
        if s["p95_ms"] is not None:
            v = min(s["p95_ms"], p95_top)
            out.append(f'<circle cx="{fx(mid(s)):.1f}" cy="{fp(v):.1f}" r="3" fill="{COLORS["p95"]}"/>')
    legend = [("offered", "offered"), ("acked", "acknowledged"),
              ("capacity", "ready replicas x calibrated knee"), ("knee", "one pod's calibrated knee"),
              ("p95", "p95 per 10 s of load (client)"), ("target", "p95 target"),
              ("replicas", "spec.replicas")]
    x = LEFT
    for key, text in legend:
        out.append(f'<line x1="{x}" x2="{x + 18}" y1="{H - 18}" y2="{H - 18}" stroke="{COLORS[key]}" stroke-width="3"/>')
        out.append(f'<text x="{x + 22}" y="{H - 14}" font-size="11">{escape(text)}</text>')
        x += 30 + 6.2 * len(text)
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(p for p in out if p) + "\n")
