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
{{- include "memcached-operator.labelList" (include "memcached-operator.selectorLabels" . | fromYaml) }}
{{- end }}

{{/* A map of labels as the controller's flags take them: `key=value,...`, sorted. */}}
{{- define "memcached-operator.labelList" -}}
{{- $labels := . }}
{{- $pairs := list }}
{{- range $key := keys $labels | sortAlpha }}
{{- $pairs = append $pairs (printf "%s=%s" $key (get $labels $key)) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/* The labels Prometheus selects an object of this chart by: prometheusLabels, with the object's
own additionalLabels (the argument) on top. */}}
{{- define "memcached-operator.prometheusLabels" -}}
{{- $labels := merge (deepCopy (.additional | default dict)) (deepCopy (.root.Values.prometheusLabels | default dict)) }}
{{- with $labels }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the controller runs as. */}}
{{- define "memcached-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "memcached-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The controller image: repository, then @digest or :tag (default: appVersion). global.imageRegistry
(an umbrella chart's, as Bitnami charts read it) replaces the repository's registry host: its
first path element when it names a host (a dot or a port in it, or localhost), as container
runtimes tell them apart.
*/}}
{{- define "memcached-operator.image" -}}
{{- $repository := .Values.image.repository }}
{{- $registry := dig "imageRegistry" "" (.Values.global | default dict) }}
{{- if $registry }}
{{- $parts := splitList "/" $repository }}
{{- $host := first $parts }}
{{- if and (gt (len $parts) 1) (or (contains "." $host) (contains ":" $host) (eq "localhost" $host)) }}
{{- $repository = rest $parts | join "/" }}
{{- end }}
{{- $repository = printf "%s/%s" (trimSuffix "/" $registry) $repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
imagePullSecrets of every pod: global.imagePullSecrets (names or {name: ...}) then imagePullSecrets,
each name once; empty when there are none.
*/}}
{{- define "memcached-operator.imagePullSecrets" -}}
{{- $names := list }}
{{- range $secret := concat (dig "imagePullSecrets" (list) (.Values.global | default dict)) .Values.imagePullSecrets }}
{{- $name := "" }}
{{- if kindIs "string" $secret }}
{{- $name = $secret }}
{{- else }}
{{- $name = $secret.name }}
{{- end }}
{{- if and $name (not (has $name $names)) }}
{{- $names = append $names $name }}
{{- end }}
{{- end }}
{{- range $names }}
- name: {{ . }}
{{- end }}
{{- end }}

{{/* The leader-election Lease: leaderElection.leaseName, else the full name (one per release). */}}
{{- define "memcached-operator.leaseName" -}}
{{- .Values.leaderElection.leaseName | default (include "memcached-operator.fullname" .) }}
{{- end }}

{{/*
The release's hash-key Secret (--hash-key-secret): one per release, so one release's uninstall
(the garbage collector deletes it with the controller's ServiceAccount) never takes another's.
*/}}
{{- define "memcached-operator.hashKeySecret" -}}
{{- printf "%s-hash-key" (include "memcached-operator.fullname" .) }}
{{- end }}

{{/*
The ValidatingAdmissionPolicy API the target cluster serves for rbac.writesGuard:
admissionregistration.k8s.io/v1 (GA since Kubernetes 1.30, so on every version the chart accepts,
1.34+), else empty where a cluster has that API turned off (the guard is left out; NOTES.txt says
so). Against a cluster (helm install, upgrade; Argo CD passes the cluster's --api-versions) Helm
knows the kinds it serves. `helm template` without them knows only group/versions.
*/}}
{{- define "memcached-operator.admissionPolicyApi" -}}
{{- $apis := .Capabilities.APIVersions }}
{{- if $apis.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" }}
{{- "admissionregistration.k8s.io/v1" }}
{{- else if $apis.Has "v1/Pod" }}
{{- /* The served kinds are known, and it is not among them. */}}
{{- else if $apis.Has "admissionregistration.k8s.io/v1" }}
{{- "admissionregistration.k8s.io/v1" }}
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
RoleBinding to the controller's ServiceAccount (`.context` is the chart's root context). `.renames`
(optional) maps resourceNames of deploy/rbac.yaml to this release's.
*/}}
{{- define "memcached-operator.boundRole" -}}
{{- $rules := include "memcached-operator.rules" (dict "context" .context "name" .source) | fromYamlArray }}
{{- range $rule := $rules }}
{{- with $rule.resourceNames }}
{{- $names := list }}
{{- range . }}
{{- $names = append $names (get ($.renames | default dict) . | default .) }}
{{- end }}
{{- $_ := set $rule "resourceNames" $names }}
{{- end }}
{{- end }}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "memcached-operator.labels" .context | nindent 4 }}
rules:
  {{- toYaml $rules | nindent 2 }}
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

{{/* The release's ClusterAdmissionPolicy: cluster-scoped, so named after the release, never shared. */}}
{{- define "memcached-operator.policyName" -}}
{{ include "memcached-operator.fullname" . }}
{{- end }}

{{/* The requests the policy judges (deploy/policy.yaml's rules), and with watchNamespaces only theirs. */}}
{{- define "memcached-operator.policyRules" -}}
- apiGroups: ["memcached.c5c3.io"]
  apiVersions: ["v1alpha1", "v1beta1"]
  resources: ["memcacheds"]
  operations: ["CREATE", "UPDATE"]
- apiGroups: ["memcached.c5c3.io"]
  apiVersions: ["v1alpha1", "v1beta1"]
  resources: ["memcacheds/scale"]
  operations: ["UPDATE"]
{{- end }}
