#!/usr/bin/env bash
# The first part of `make demo`: the policy judging every example CR of the design documents
# (e2e-tests/fixtures, requests named seed-* and design-*, v1beta1), run by Kubewarden's kwctl
# as policy-server runs it: each verdict, the defaults it adds and every message. It needs
# only the policy and kwctl, so it comes before anything of the local cluster is built.
#
# usage: hack/demo-verdicts.sh KWCTL POLICY FIXTURES
set -euo pipefail
kwctl=$1 policy=$2 fixtures=$3
[ -n "$kwctl" ] || { echo "kwctl not found: put it on PATH or set KWCTL" >&2; exit 1; }

# What the JSON patch of an answer adds to or changes in the request's object ($object), one leaf a
# line: "+ spec.memcached.maxMemoryMB: 64", "~ spec.x: old -> new".
# shellcheck disable=SC2016
leaves='.patch // empty | @base64d | fromjson | .[]
	| (.path | ltrimstr("/") | split("/") | map(tonumber? // .)) as $at
	| .value as $value
	| if ($value | type) == "object" or ($value | type) == "array"
	  then [$value | paths(scalars)] | map(. as $q | [$at + $q, ($value | getpath($q))]) | .[]
	  else [$at, $value] end
	| .[0] as $path | .[1] as $new | ($object | getpath($path)) as $old
	| select($old != $new)
	| if $old == null then "     + \($path | map(tostring) | join(".")): \($new | tojson)"
	  else "     ~ \($path | map(tostring) | join(".")): \($old | tojson) -> \($new | tojson)" end'

log=$(mktemp)
trap 'rm -f "$log"' EXIT
accepted=0 rejected=0
for request in "$fixtures"/requests/{seed,design}-*.json; do
	name=$(basename "$request" .json)
	[[ $name != *-v1alpha1 ]] || continue
	# kwctl logs on stderr (offline, always a Sigstore warning): shown only when it fails.
	answer=$("$kwctl" run --allow-context-aware \
		--replay-host-capabilities-interactions "$fixtures/sessions/namespace-unlabelled.yml" \
		--request-path "$request" --settings-json "$(jq -c .settings "$fixtures/expected/$name.json")" \
		"$policy" 2>"$log") || { echo "kwctl could not run the policy on $name:" >&2; cat "$log" >&2; exit 1; }
	jq -r '"\n== \(.request.name // .request.object.metadata.name) (\(.request.operation) \(.request.kind.version)/\(.request.kind.kind)), example \(input_filename | split("/") | last | rtrimstr(".json"))"' \
		"$request" 2>/dev/null || echo "== $name"
	if [ "$(jq -r .allowed <<<"$answer")" = true ]; then
		accepted=$((accepted + 1))
		defaults=$(jq -r --argjson object "$(jq -c .request.object "$request")" "$leaves" <<<"$answer")
		if [ -n "$defaults" ]; then echo "   ACCEPTED, with defaults:"; echo "$defaults"; else echo "   ACCEPTED, unchanged"; fi
	else
		rejected=$((rejected + 1))
		jq -r '"   REJECTED (code \(.status.code)):\n   \(.status.message)"' <<<"$answer"
	fi
	jq -r '.warnings // [] | .[] | "   Warning: \(.)"' <<<"$answer"
done
echo
echo "$accepted accepted, $rejected rejected by $(basename "$policy") on kwctl $("$kwctl" --version 2>/dev/null | awk '{print $2; exit}')"
