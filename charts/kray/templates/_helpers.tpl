{{/* kray.name is the chart name, or nameOverride. */}}
{{- define "kray.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* kray.fullname names the release's objects: fullnameOverride, else the release name when it contains the
chart name, else "<release>-<chart>". */}}
{{- define "kray.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* kray.selectorLabels select the operator's pods. */}}
{{- define "kray.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kray.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* kray.labels go on every object of the chart. */}}
{{- define "kray.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "kray.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* kray.serviceAccountName is the operator's ServiceAccount. */}}
{{- define "kray.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kray.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
kray.watchNamespaces is the list of watched namespaces, comma-separated: watchNamespaces, else KubeRay's
watchNamespace, else (singleNamespaceInstall) the release namespace; empty watches all.
*/}}
{{- define "kray.watchNamespaces" -}}
{{- $ns := .Values.watchNamespaces | default .Values.watchNamespace | default list -}}
{{- if and (not $ns) .Values.singleNamespaceInstall -}}
{{- $ns = list .Release.Namespace -}}
{{- end -}}
{{- join "," $ns -}}
{{- end }}
