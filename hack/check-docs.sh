#!/usr/bin/env bash
# The documentation's checks (run by `make lint`): docs/reference/memcached.md matches deploy/crd.yaml
# (hack/crd_reference.py --check), and every relative link of README.md and docs/ resolves, anchors included
# (GitHub's heading slugs). Links to web pages are not fetched.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 hack/crd_reference.py --check
python3 - README.md $(find docs -name '*.md' | sort) <<'EOF'
import re
import sys
from pathlib import Path
from urllib.parse import unquote

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def prose(lines):
    """(number, line) outside fenced code blocks, with inline code spans blanked."""
    fenced = False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading: its text, lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"[*_~]{1,3}(\S(?:.*?\S)?)[*_~]{1,3}", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        fenced = False
        for line in path.read_text().splitlines():
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            match = HEADING.match(line)
            if match:
                base = slug(match.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
            found.update(ANCHOR.findall(line))
        cache[path] = found
    return cache[path]


problems = 0
for name in sys.argv[1:]:
    source = Path(name)
    for number, line in prose(source.read_text().splitlines()):
        targets = [m.group(1) for m in LINK.finditer(line)] + [m.group(1) for m in REFERENCE.finditer(line)]
        for target in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (source.parent / unquote(file_part)).resolve() if file_part else source.resolve()
            where = f"{source}:{number}: {target}"
            if not resolved.exists():
                print(f"{where}: no such file", file=sys.stderr)
                problems += 1
            elif anchor and resolved.suffix == ".md" and unquote(anchor) not in anchors(resolved):
                print(f"{where}: no heading with anchor #{anchor} in {Path(resolved).relative_to(Path.cwd())}",
                      file=sys.stderr)
                problems += 1
if problems:
    sys.exit(f"{problems} broken link(s) in README.md and docs/")
EOF
