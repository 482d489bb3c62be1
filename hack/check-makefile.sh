#!/usr/bin/env bash
# The Makefile's own lint (part of `make lint`):
# - no variable is used before its definition: make expands a rule's prerequisites as it reads the rule, so a
#   list defined further down is silently empty there (how `make demo` once built no node on a fresh clone);
# - every target `make help` documents (`## <target>: ...`) is a target make knows;
# - `make demo` builds (DEMO_PIECES, one progress line each) every piece of CLUSTER_PIECES and NODE_PIECES,
#   which `make test` takes as prerequisites: a piece added to one list only is a demo without it.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
if undefined=$(make --no-print-directory --warn-undefined-variables -n help 2>&1 >/dev/null | grep 'undefined variable'); then
	echo "$undefined"
	echo "Makefile: a variable is used before it is defined (define it above the first rule that names it)"
	status=1
fi
known=$(make -pRrq -f Makefile __database__ 2>/dev/null | sed -n 's/^\([^#[:space:]][^=]*\):\([^=].*\)\{0,1\}$/\1/p' || true)
while read -r target; do
	grep -qxF "$target" <<<"$known" || { echo "Makefile: make help documents '$target', which is not a target"; status=1; }
done < <(sed -n 's/^## \([^ :]*\):.*/\1/p' Makefile)
database=$(make -pRrq -f Makefile __database__ 2>/dev/null || true)
demo=$(sed -n 's/^DEMO_PIECES := //p' <<<"$database")
for piece in $(sed -n 's/^\(CLUSTER\|NODE\)_PIECES := //p' <<<"$database"); do
	grep -qF "'$piece|" <<<"$demo" || { echo "Makefile: DEMO_PIECES lacks $piece, which make test builds"; status=1; }
done
exit $status
