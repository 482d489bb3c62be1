#!/usr/bin/env python3
"""The policy's packaging agrees with itself: metadata.yml, artifacthub-pkg.yml,
questions-ui.yml, deploy/policy*.yaml and the crate version tell one story.
Prints 'N passed, N failed' and exits non-zero on any disagreement."""
import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
load = lambda name: yaml.safe_load((ROOT / name).read_text())

metadata = load("metadata.yml")
artifacthub = load("artifacthub-pkg.yml")
questions = load("questions-ui.yml")
policies = [load("deploy/policy.yaml"), load("deploy/policy-audit.yaml")]
crate_version = re.search(r'^version = "(.*)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
settings_source = (ROOT / "policy-wasm/src/settings.rs").read_text()
version = metadata["annotations"]["io.kubewarden.policy.version"]
oci = metadata["annotations"]["io.kubewarden.policy.ociUrl"]

sorted_resources = lambda resources: sorted(resources, key=lambda r: (r["apiVersion"], r["kind"]))

checks = {
    "policy version is the crate version": version == crate_version,
    "artifacthub version is the policy version": artifacthub["version"] == version,
    # Artifact Hub requires an image named "policy" and shows a Kubewarden package as signed when
    # every containersImages entry has a cosign signature: only the artifact `make push` pushes
    # (and cosign signs) may be listed.
    "artifacthub image is the policy OCI artifact, alone": artifacthub["containersImages"]
        == [{"name": "policy", "image": f"{oci}:v{version}"}],
    "artifacthub rules are metadata.yml's": yaml.safe_load(artifacthub["annotations"]["kubewarden/rules"]) == metadata["rules"],
    "artifacthub mutation flag is metadata.yml's": artifacthub["annotations"]["kubewarden/mutation"] == str(metadata["mutating"]).lower(),
    "artifacthub questions are questions-ui.yml": yaml.safe_load(artifacthub["annotations"]["kubewarden/questions-ui"]) == questions,
    # A set to Kubewarden: kwctl scaffold lists it sorted.
    "artifacthub context-aware resources are metadata.yml's":
        sorted_resources(yaml.safe_load(artifacthub["annotations"]["kubewarden/contextAwareResources"]))
        == sorted_resources(metadata["contextAwareResources"]),
    "artifacthub resources are metadata.yml's": artifacthub["annotations"]["kubewarden/resources"]
        == metadata["annotations"]["io.artifacthub.resources"],
    "metadata is a wapc Kubernetes policy, audited, reads Namespaces and Memcacheds only": metadata["executionMode"] == "kubewarden-wapc"
        and metadata["policyType"] == "kubernetes"
        and metadata["backgroundAudit"] is True
        and metadata.get("contextAwareResources") == [{"apiVersion": "v1", "kind": "Namespace"},
                                                       {"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached"}]
        and metadata.get("hostCapabilities") == ["kubernetes/get_resource"],
    # kwctl and policy-server parse it as semver and refuse the policy on an older release.
    # At the workspace root Artifact Hub would show the root README (the project's); the package
    # carries the policy's own page instead (hack/artifacthub-pkg.py writes it in).
    "artifacthub readme is policy-wasm/README.md": artifacthub.get("readme") == (ROOT / "policy-wasm/README.md").read_text(),
    "minimum Kubewarden version is a release": re.fullmatch(r"\d+\.\d+\.\d+", str(metadata.get("minimumKubewardenVersion"))) is not None,
    "rules cover the object and its scale subresource, never status": sorted(r for rule in metadata["rules"] for r in rule["resources"])
        == ["memcacheds", "memcacheds/scale"],
}
# Settings fields are snake_case in Rust and camelCase in JSON.
camel = lambda s: re.sub(r"_(\w)", lambda m: m.group(1).upper(), s)
fields = re.findall(r"pub (\w+): ", settings_source.split("pub struct Settings", 1)[1].split("}", 1)[0])
checks["every setting has a question"] = sorted(q["variable"] for q in questions["questions"]) == sorted(map(camel, fields))
for p in policies:
    name = p["metadata"]["name"]
    checks[f"deploy {name} uses this version"] = p["spec"]["module"] == f"registry://{oci}:v{version}"
    checks[f"deploy {name} rules are metadata.yml's"] = p["spec"]["rules"] == metadata["rules"]
    checks[f"deploy {name} settings are known"] = set(p["spec"].get("settings", {})) <= set(map(camel, fields))
    checks[f"deploy {name} grants metadata.yml's context"] = p["spec"].get("contextAwareResources") == metadata["contextAwareResources"]
# The policy's own page (embedded into the artifact, shown on Artifact Hub) shows deploy/policy.yaml: the same
# object, its comments and Kubewarden's annotations aside.
readme_policies = [doc for block in re.findall(r"```yaml\n(.*?)```", (ROOT / "policy-wasm/README.md").read_text(), re.S)
                   for doc in [yaml.safe_load(block)] if isinstance(doc, dict) and doc.get("kind") == "ClusterAdmissionPolicy"]
shown = lambda p: {**p, "metadata": {"name": p["metadata"]["name"]}}
checks["the policy README's ClusterAdmissionPolicy is deploy/policy.yaml"] = [shown(p) for p in readme_policies] == [shown(policies[0])]

failed = [name for name, ok in checks.items() if not ok]
for name in checks:
    print(("ok   " if name not in failed else "FAIL ") + name)
print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
