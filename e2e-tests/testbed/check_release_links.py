#!/usr/bin/env python3
"""Every release download the project links exists in a release: each
https://github.com/<repository>/releases/download/<tag>/<asset> of artifacthub-pkg.yml, README.md,
docs/**/*.md, policy-wasm/README.md (Artifact Hub's readme) and the chart's README names an asset
deploy/release.sh builds (`deploy/release.sh --list`, the script's one list), in this project's
repository, under the tag of the version that asset carries: v<Chart.yaml version> for the chart
archive, v<metadata.yml's io.kubewarden.policy.version> for the rest. A tag written as a placeholder
(`v<version>`) is accepted. Prints 'N passed, N failed' and exits non-zero on any failure."""
import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy/helm/memcached-operator"
LINK = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+)/releases/download/([^/\s`)\"'>]+)/([^\s`)\"'>]+)")

metadata = yaml.safe_load((ROOT / "metadata.yml").read_text())
policy_version = metadata["annotations"]["io.kubewarden.policy.version"]
repository = re.sub(r"^https://github\.com/", "", metadata["annotations"]["io.kubewarden.policy.source"]).rstrip("/")
chart_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
assets = subprocess.run([str(ROOT / "deploy/release.sh"), "--list"], check=True, capture_output=True,
                        text=True).stdout.split()

files = [ROOT / "artifacthub-pkg.yml", ROOT / "README.md", ROOT / "policy-wasm/README.md", CHART / "README.md",
         *sorted((ROOT / "docs").rglob("*.md"))]
links = [(path.relative_to(ROOT), number, match)
         for path in files
         for number, line in enumerate(path.read_text().splitlines(), 1)
         for match in LINK.finditer(line)]

checks = {
    "deploy/release.sh --list names the assets, SHA256SUMS and cosign.pub among them":
        len(assets) == len(set(assets)) > 2 and {"SHA256SUMS", "cosign.pub"} <= set(assets),
    # The one link Artifact Hub shows: if it went, this check would silently check nothing.
    "artifacthub-pkg.yml links the policy's release download":
        any(str(path) == "artifacthub-pkg.yml" for path, _, _ in links),
}
for path, number, match in links:
    repo, tag, asset = match.groups()
    where = f"{path}:{number}: {match.group(0)}"
    want = f"v{chart_version}" if asset.startswith("memcached-operator-") and asset.endswith(".tgz") else f"v{policy_version}"
    checks[f"{where}: repository {repository}"] = repo == repository
    checks[f"{where}: an asset deploy/release.sh builds"] = asset in assets
    checks[f"{where}: tag {want}"] = tag in (want, "v<version>")

failed = [name for name, ok in checks.items() if not ok]
for name in checks:
    print(("ok   " if name not in failed else "FAIL ") + name)
print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
