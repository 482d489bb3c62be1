{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "memcached-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: fullnameOverride, else the release name when it already
contains the chart name, else "<release>-<chart>"; at most 63 characters.
*/}}
{{- define "memcached-operator.fullname" -}}
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

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "memcached-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Standard labels of every object. */}}
{{- define "memcached-operator.labels" -}}
helm.sh/chart: {{ include "memcached-operator.chart" . }}
{{ include "memcached-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: memcached-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels selecting the controller pods. */}}
{{- define "memcached-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memcached-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The selector labels as key=value,... (OPERATOR_POD_LABELS): every Memcached NetworkPolicy admits
the controller pods by exactly these labels, so nameOverride and the release name carry over.
*/}}
{{- define "memcached-operator.selectorLabelList" -}}
{{- $labels := include "memcached-operator.selectorLabels" . | fromYaml }}
{{- $pairs := list }}
{{- range $key := keys $labels | sortAlpha }}
{{- $pairs = append $pairs (printf "%s=%s" $key (get $labels $key)) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/* The ServiceAccount the controller runs as. */}}
{{- define "memcached-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "memcached-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The controller image: repository, then @digest or :tag (default: appVersion). */}}
{{- define "memcached-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The documents of a file under files/ (a symlink into deploy/, the single source) as a list of
objects, so the chart re-labels them but never restates their rules.
*/}}
{{- define "memcached-operator.fileObjects" -}}
{{- $objects := list }}
{{- range $doc := regexSplit "(?m)^---\\s*$" (.context.Files.Get .file) -1 }}
{{- $object := fromYaml $doc }}
{{- if $object }}
{{- $objects = append $objects $object }}
{{- end }}
{{- end }}
{{- toJson $objects }}
{{- end }}

{{/* The rules of the (Cluster)Role `.name` of deploy/rbac.yaml (files/rbac.yaml). */}}
{{- define "memcached-operator.rules" -}}
{{- $found := false }}
{{- range (include "memcached-operator.fileObjects" (dict "context" .context "file" "files/rbac.yaml") | fromJsonArray) }}
{{- if and (has .kind (list "ClusterRole" "Role")) (eq .metadata.name $.name) }}
{{- $found = true }}
{{- toYaml .rules }}
{{- end }}
{{- end }}
{{- if not $found }}
{{- fail (printf "deploy/rbac.yaml has no role %s" .name) }}
{{- end }}
{{- end }}

{{/*
A Role in `.namespace` with the rules of deploy/rbac.yaml's role `.source`, named `.name`, and its
RoleBinding to the controller's ServiceAccount (`.context` is the chart's root context).
*/}}
{{- define "memcached-operator.boundRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "memcached-operator.labels" .context | nindent 4 }}
rules:
  {{- include "memcached-operator.rules" (dict "context" .context "name" .source) | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "memcached-operator.labels" .context | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
  {{- include "memcached-operator.subjects" .context | nindent 2 }}
{{- end }}

{{/* The controller's ServiceAccount as the subject of a binding. */}}
{{- define "memcached-operator.subjects" -}}
- kind: ServiceAccount
  name: {{ include "memcached-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}
