{{/* Chart name, truncated to 63 characters (a label value). */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects: <release>-sluice, or the release name when it already contains the chart name. */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of the operator's objects (Deployment, Service, RBAC). */}}
{{- define "sluice.operatorName" -}}
{{- printf "%s-operator" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object of the release. */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ include "sluice.chart" . }}
app.kubernetes.io/part-of: sluice
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
{{- end }}

{{/* Selector of the operator's pods. Never change it: a Deployment's selector is immutable. */}}
{{- define "sluice.operatorSelectorLabels" -}}
app.kubernetes.io/name: sluice-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.operatorLabels" -}}
{{ include "sluice.labels" . }}
{{ include "sluice.operatorSelectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.operatorName" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sluice.operatorImage" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "sluice.serverImage" -}}
{{- printf "%s:%s" .Values.serverImage.repository (default .Chart.AppVersion .Values.serverImage.tag) }}
{{- end }}

{{/* Leader election: "auto" means on when more than one replica runs. */}}
{{- define "sluice.leaderElection" -}}
{{- $le := toString .Values.operator.leaderElection }}
{{- if eq $le "auto" }}
{{- if gt (int .Values.operator.replicas) 1 }}true{{ else }}false{{ end }}
{{- else }}
{{- $le }}
{{- end }}
{{- end }}

{{/* True when the Prometheus Operator's API is served (or `helm template --api-versions` says so). */}}
{{- define "sluice.monitoringApi" -}}
{{- if and .Values.monitoring.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") }}true{{ end }}
{{- end }}

{{- define "sluice.monitoringLabels" -}}
{{ include "sluice.labels" . }}
{{- with .Values.monitoring.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Go duration string (250ms, 1s, 1m30s) to seconds, for the tenants' p95 targets. */}}
{{- define "sluice.durationSeconds" -}}
{{- $d := toString . }}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9]+(ns|us|ms|s|m|h|d|w)" $d -1 }}
{{- $n := float64 (regexFind "^[0-9]+" .) }}
{{- $u := regexFind "(ns|us|ms|s|m|h|d|w)$" . }}
{{- $f := get (dict "ns" 1e-9 "us" 1e-6 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 "d" 86400.0 "w" 604800.0) $u }}
{{- $total = addf $total (mulf $n $f) }}
{{- end }}
{{- $total }}
{{- end }}
