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

{{/* The controller's rules: the ClusterRole of deploy/rbac.yaml. */}}
{{- define "memcached-operator.rules" -}}
{{- range (include "memcached-operator.fileObjects" (dict "context" . "file" "files/rbac.yaml") | fromJsonArray) }}
{{- if eq .kind "ClusterRole" }}
{{- toYaml .rules }}
{{- end }}
{{- end }}
{{- end }}

{{/* The leader-election rules: the Role of deploy/rbac.yaml. */}}
{{- define "memcached-operator.leaderElectionRules" -}}
{{- range (include "memcached-operator.fileObjects" (dict "context" . "file" "files/rbac.yaml") | fromJsonArray) }}
{{- if eq .kind "Role" }}
{{- toYaml .rules }}
{{- end }}
{{- end }}
{{- end }}
