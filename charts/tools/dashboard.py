# Generates charts/sluice/files/dashboard.json (Grafana); charts/test checks that the two agree.
#   python3 charts/tools/dashboard.py > charts/sluice/files/dashboard.json
import json
DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'namespace=~"$namespace", tenant=~"$tenant"'
panels, y = [], 0
pid = [0]
def nid():
    pid[0] += 1; return pid[0]
def row(title):
    global y
    panels.append({"type": "row", "title": title, "id": nid(), "collapsed": False, "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []}); y += 1
def ts(title, targets, unit, x, w=8, h=8, desc="", stack=False, thresholds=None):
    p = {"type": "timeseries", "title": title, "id": nid(), "datasource": DS, "description": desc,
         "gridPos": {"h": h, "w": w, "x": x, "y": y},
         "fieldConfig": {"defaults": {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 10 if stack else 0,
                           "stacking": {"mode": "normal" if stack else "none"}, "showPoints": "never"}}, "overrides": []},
         "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                     "tooltip": {"mode": "multi", "sort": "desc"}},
         "targets": [{"datasource": DS, "expr": e, "legendFormat": l, "refId": chr(65 + i)} for i, (e, l) in enumerate(targets)]}
    panels.append(p)
def stat(title, expr, unit, x, w=4, h=4, desc=""):
    panels.append({"type": "stat", "title": title, "id": nid(), "datasource": DS, "description": desc,
                   "gridPos": {"h": h, "w": w, "x": x, "y": y},
                   "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                   "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "colorMode": "value", "graphMode": "area"},
                   "targets": [{"datasource": DS, "expr": expr, "refId": "A", "instant": False}]})
def nl(h):
    global y; y += h

stat("Points acknowledged/s", f'sum(rate(sluice_points_acknowledged_total{{{SEL}}}[5m]))', "short", 0, desc="Durably committed to the WAL and answered 204")
stat("Write p95", f'histogram_quantile(0.95, sum by (le) (rate(sluice_http_request_duration_seconds_bucket{{{SEL}, endpoint=~"write|write_v2"}}[5m])))', "s", 4)
stat("Write 5xx ratio", f'sum(rate(sluice_http_requests_total{{{SEL}, endpoint=~"write|write_v2", code=~"5.."}}[5m])) / sum(rate(sluice_http_requests_total{{{SEL}, endpoint=~"write|write_v2"}}[5m]))', "percentunit", 8)
stat("WAL backlog", f'sum(sluice_wal_backlog_bytes{{{SEL}}})', "bytes", 12)
stat("Max flush lag", f'max(sluice_flush_lag_seconds{{{SEL}}})', "s", 16)
stat("Ready pods", f'sum(sluice_ready{{{SEL}}})', "short", 20)
nl(4)
row("Ingest")
ts("Ingest rate (points/s)", [
    (f'sum by (tenant) (rate(sluice_points_acknowledged_total{{{SEL}}}[5m]))', "{{tenant}} acknowledged"),
    (f'sum by (tenant) (rate(sluice_points_offered_total{{{SEL}}}[5m]))', "{{tenant}} offered"),
    (f'sum by (tenant) (rate(sluice_points_flushed_total{{{SEL}}}[5m]))', "{{tenant}} flushed"),
    (f'sum by (tenant, reason) (rate(sluice_points_rejected_total{{{SEL}}}[5m]))', "{{tenant}} rejected ({{reason}})")],
   "short", 0, desc="Offered: received in write requests; acknowledged: durable and answered 204; flushed: in chDB.")
ts("Write latency percentiles", [
    *[(f'histogram_quantile(0.{p}, sum by (tenant, le) (rate(sluice_http_request_duration_seconds_bucket{{{SEL}, endpoint=~"write|write_v2"}}[5m])))', f"{{{{tenant}}}} p{p}")
      for p in ("50", "95", "99")],
    (f'sluice:tenant_p95_target_seconds{{{SEL}}}', "{{tenant}} p95 target")],
   "s", 8, desc="Request latency of /write and /api/v2/write, first byte to answer. The target comes from the chart's p95 targets (default 250ms).")
ts("Write requests/s by status", [
    (f'sum by (tenant, code) (rate(sluice_http_requests_total{{{SEL}, endpoint=~"write|write_v2"}}[5m]))', "{{tenant}} {{code}}"),
    (f'sum by (tenant, reason) (rate(sluice_backpressure_total{{{SEL}}}[5m]))', "{{tenant}} 503 {{reason}}")],
   "reqps", 16)
nl(8)
row("WAL and flush")
ts("WAL backlog (bytes)", [(f'sluice_wal_backlog_bytes{{{SEL}}}', "{{pod}}")], "bytes", 0, desc="Committed to the WAL, not yet in chDB.")
ts("WAL backlog (points) and queue", [
    (f'sluice_wal_backlog_points{{{SEL}}}', "{{pod}} points"),
    (f'sluice_wal_queue_requests{{{SEL}}}', "{{pod}} requests waiting for the committer")], "short", 8)
ts("Flush lag and oldest unflushed", [
    (f'sluice_flush_lag_seconds{{{SEL}}}', "{{pod}} flush lag"),
    (f'sluice_wal_oldest_unflushed_age_seconds{{{SEL}}}', "{{pod}} oldest unflushed")], "s", 16,
   desc="Age of the oldest acknowledged point not yet queryable.")
nl(8)
ts("Stage latency p95", [
    (f'histogram_quantile(0.95, sum by (stage, le) (rate(sluice_stage_duration_seconds_bucket{{{SEL}}}[5m])))', "{{stage}}")], "s", 0)
ts("Flush failures and chDB errors /s", [
    (f'sum by (pod, table) (rate(sluice_flush_failures_total{{{SEL}}}[5m]))', "{{pod}} flush {{table}}"),
    (f'sum by (pod, op) (rate(sluice_chdb_errors_total{{{SEL}}}[5m]))', "{{pod}} chDB {{op}}")], "short", 8)
ts("Group commit size (requests per WAL sync), p50", [
    (f'histogram_quantile(0.5, sum by (pod, le) (rate(sluice_wal_group_commit_requests_bucket{{{SEL}}}[5m])))', "{{pod}}")], "short", 16)
nl(8)
row("Storage")
ts("Active parts per table (top 10)", [(f'topk(10, sluice_table_parts{{{SEL}}})', "{{pod}} {{table}}")], "short", 0,
   desc="ClickHouse delays inserts at 1000 parts per partition and refuses them at 3000.")
ts("Volume used", [(
    f'1 - (label_replace(kubelet_volume_stats_available_bytes{{namespace=~"$namespace"}}, "pod", "$1", "persistentvolumeclaim", "data-(.+-[0-9]+)") / label_replace(kubelet_volume_stats_capacity_bytes{{namespace=~"$namespace"}}, "pod", "$1", "persistentvolumeclaim", "data-(.+-[0-9]+)")) and on (namespace, pod) sluice_ready{{{SEL}}}',
    "{{persistentvolumeclaim}}")], "percentunit", 8)
ts("Series and limit", [(f'sluice_series{{{SEL}}}', "{{pod}} series"), (f'sluice_series_limit{{{SEL}}}', "{{pod}} limit")], "short", 16)
nl(8)
row("Replicas and knee")
ts("Replicas", [
    (f'sum by (tenant) (sluice_ready{{{SEL}}})', "{{tenant}} ready"),
    (f'count by (tenant) (up{{job="sluice-server", {SEL}}})', "{{tenant}} running"),
    ('sluice_tenant_replicas{namespace=~"$namespace", tenant=~"$tenant"}', "{{tenant}} desired (spec)")], "short", 0,
   desc="Desired replicas need kube-state-metrics with the chart's custom-resource config (monitoring.kubeStateMetrics).")
ts("Offered rate per replica vs knee", [
    (f'sum by (tenant) (rate(sluice_points_offered_total{{{SEL}}}[5m])) / sum by (tenant) (sluice_ready{{{SEL}}})', "{{tenant}} offered per ready replica"),
    ('sluice_tenant_knee_points_per_second{namespace=~"$namespace", tenant=~"$tenant"}', "{{tenant}} knee")], "short", 8,
   desc="The knee is the operator's measurement (status.knee), exported by kube-state-metrics with the chart's custom-resource config.")
nl(8)
row("Operator")
ts("Reconciles and errors /s", [
    ('sum(rate(sluice_operator_reconciles_total{job="sluice-operator"}[5m]))', "reconciles"),
    ('sum by (error) (rate(sluice_operator_reconcile_errors_total{job="sluice-operator"}[5m]))', "errors {{error}}")], "short", 0)
ts("Reconcile duration p95", [
    ('histogram_quantile(0.95, sum by (le) (rate(sluice_operator_reconcile_duration_seconds_bucket{job="sluice-operator"}[5m])))', "p95")], "s", 8)
ts("Applies /s and leader", [
    ('sum by (kind, outcome) (rate(sluice_operator_applies_total{job="sluice-operator"}[5m]))', "{{kind}} {{outcome}}"),
    ('sluice_operator_leader{job="sluice-operator"}', "leader {{pod}}")], "short", 16)
nl(8)

def var(name, query, label, multi=True):
    return {"name": name, "label": label, "type": "query", "datasource": DS, "query": {"query": query, "refId": name},
            "definition": query, "refresh": 2, "includeAll": True, "multi": multi, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "sort": 1}
dash = {
  "title": "sluice", "uid": "sluice-overview", "description": "sluice tenants: ingest, latency, WAL, flush, parts, replicas and knee, operator",
  "tags": ["sluice"], "timezone": "browser", "schemaVersion": 39, "version": 1, "editable": True,
  "refresh": "30s", "time": {"from": "now-3h", "to": "now"}, "graphTooltip": 1,
  "templating": {"list": [
     {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": {}, "hide": 0},
     var("namespace", "label_values(sluice_ready, namespace)", "Namespace"),
     var("tenant", 'label_values(sluice_ready{namespace=~"$namespace"}, tenant)', "Tenant")]},
  "annotations": {"list": []}, "links": [], "panels": panels}
print(json.dumps(dash, indent=2))
