#!/usr/bin/env python3
"""Write docs/reference/memcached.md, the `Memcached` reference, from the CRD schema (deploy/crd.yaml).

    hack/crd_reference.py            # (re)write docs/reference/memcached.md
    hack/crd_reference.py --check    # exit 1 when the committed page differs from what the CRD gives

Every field of the storage version's schema gets a row: its path, type, default, bounds and description.
The schema carries no defaults (the policy defaults, see controller/src/commands/crd.rs): the Default column is the
`default ...` clause of the field's own description, which the API types' doc comments always state. Fields of
an embedded Kubernetes type (a SecurityContext, a Toleration, ...) are not expanded: the row names the type and
its fields, which are Kubernetes' own. Other served versions are compared with the storage version; a
difference is listed on the page.

Needs Python 3 and PyYAML (`make deps` installs it). --crd and --out read and write other files (tests).
"""

import argparse
import difflib
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CRD = ROOT / "deploy" / "crd.yaml"
PAGE = ROOT / "docs" / "reference" / "memcached.md"

# Subtrees that are Kubernetes' own types, by path ("[]" marks a list's items), with the API group/version
# and kind. A field of such a type that is missing here is expanded in full: correct, only longer.
KUBERNETES_TYPES = {
    "spec.autoscaling.behavior": ("autoscaling/v2", "HorizontalPodAutoscalerBehavior"),
    "spec.autoscaling.metrics[]": ("autoscaling/v2", "MetricSpec"),
    "spec.highAvailability.topologySpreadConstraints[]": ("core/v1", "TopologySpreadConstraint"),
    "spec.imagePullSecrets[]": ("core/v1", "LocalObjectReference"),
    "spec.monitoring.exporterResources": ("core/v1", "ResourceRequirements"),
    "spec.networkPolicy.allowedSources[]": ("networking/v1", "NetworkPolicyPeer"),
    "spec.resources": ("core/v1", "ResourceRequirements"),
    "spec.security.containerSecurityContext": ("core/v1", "SecurityContext"),
    "spec.security.networkPolicy.allowedSources[]": ("networking/v1", "NetworkPolicyPeer"),
    "spec.security.podSecurityContext": ("core/v1", "PodSecurityContext"),
    "spec.security.sasl.credentialsSecretRef": ("core/v1", "LocalObjectReference"),
    "spec.security.tls.certificateSecretRef": ("core/v1", "LocalObjectReference"),
    "spec.tolerations[]": ("core/v1", "Toleration"),
    "status.conditions[]": ("meta/v1", "Condition"),
}

# Keywords the page renders; any other keyword in the schema stops the generator, so nothing is left out silently.
KNOWN_KEYWORDS = {
    "description", "type", "format", "nullable", "properties", "items", "additionalProperties", "required",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
    "maxItems", "minProperties", "maxProperties", "pattern", "enum", "default", "title",
    "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
}


def text(description):
    """A description on one line: YAML's wrapped lines and paragraphs joined."""
    return " ".join((description or "").split())


def cell(value):
    """Table cell text: `|` escaped, `<` outside code spans kept from being read as HTML."""
    parts = re.split(r"(`[^`]*`)", value)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(part.replace("|", "\\|"))
        else:
            out.append(part.replace("|", "\\|").replace("<", "&lt;"))
    return "".join(out)


def number(value):
    return str(int(value)) if float(value).is_integer() else str(value)


def type_of(node, path):
    """The field's type as a reader writes it: int32, []string, map[string]string, ..."""
    if path in KUBERNETES_TYPES:
        group, kind = KUBERNETES_TYPES[path]
        return f"{kind} ({group})"
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    kind = node.get("type", "")
    if kind == "integer" or kind == "number":
        return node.get("format", kind)
    if kind == "array":
        item_path = path + "[]"
        items = node.get("items", {})
        if item_path in KUBERNETES_TYPES:
            group, name = KUBERNETES_TYPES[item_path]
            return f"[]{name} ({group})"
        return "[]" + (type_of(items, item_path) if items.get("type") != "object" else "object")
    if kind == "object" and isinstance(node.get("additionalProperties"), dict) and not node.get("properties"):
        return "map[string]" + type_of(node["additionalProperties"], path + "{}")
    if kind == "string" and node.get("format"):
        return f"string ({node['format']})"
    return kind or "any"


def bounds(node, required):
    """Bounds, enum, pattern and list/map sizes of one node (and of a list's or map's items)."""
    out = []
    if required:
        out.append("required")
    lo, hi = node.get("minimum"), node.get("maximum")
    if lo is not None and hi is not None:
        out.append(f"{number(lo)} to {number(hi)}")
    elif lo is not None:
        out.append(f">= {number(lo)}")
    elif hi is not None:
        out.append(f"<= {number(hi)}")
    if node.get("exclusiveMinimum") or node.get("exclusiveMaximum"):
        out.append("bounds exclusive")
    if "enum" in node:
        out.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    if "pattern" in node:
        out.append(f"pattern `{node['pattern']}`")
    if "minLength" in node:
        out.append(f"at least {node['minLength']} characters")
    if "maxLength" in node:
        out.append(f"at most {node['maxLength']} characters")
    if "minItems" in node:
        out.append(f"at least {node['minItems']} items")
    if "maxItems" in node:
        out.append(f"at most {node['maxItems']} items")
    if "minProperties" in node:
        out.append(f"at least {node['minProperties']} entries")
    if "maxProperties" in node:
        out.append(f"at most {node['maxProperties']} entries")
    if node.get("x-kubernetes-list-type") == "map":
        keys = ", ".join(f"`{k}`" for k in node.get("x-kubernetes-list-map-keys", []))
        out.append(f"a map keyed by {keys} (server-side apply merges entries one by one)")
    elif node.get("x-kubernetes-list-type"):
        out.append(f"list type `{node['x-kubernetes-list-type']}`")
    for rule in node.get("x-kubernetes-validations", []):
        out.append(f"rule `{rule.get('rule')}`")
    for key, what in (("items", "each item"), ("additionalProperties", "each value")):
        inner = node.get(key)
        if isinstance(inner, dict) and not inner.get("properties"):
            inner_bounds = bounds(inner, False)
            if inner_bounds:
                out.append(f"{what}: {inner_bounds}")
    return "; ".join(out)


DEFAULT_CLAUSE = re.compile(r"(?:^|[;.] )((?:no )?default\b[^;]*?)(?:\.(?= |$)|;|$)")
DEFAULT_IN_PARENS = re.compile(r"`([^`]+)` \(default\b")


def default_of(node):
    """The schema's default, else the `default ...` clause of the description."""
    if "default" in node:
        return f"`{yaml.safe_dump(node['default'], default_flow_style=True).strip()}` (schema)"
    description = text(node.get("description"))
    match = DEFAULT_CLAUSE.search(description)
    if match:
        clause = match.group(1)
        return clause[len("default "):] if clause.startswith("default ") else clause
    match = DEFAULT_IN_PARENS.search(description)
    if match:
        return f"`{match.group(1)}`"
    return ""


def children(node):
    """(name, child, required) of an object's properties, in name order."""
    required = set(node.get("required", []))
    return [(name, child, name in required) for name, child in sorted((node.get("properties") or {}).items())]


def check_keywords(node, path):
    unknown = set(node) - KNOWN_KEYWORDS
    if unknown:
        sys.exit(f"hack/crd_reference.py: {path} uses {sorted(unknown)}, which the page does not render: teach "
                 "the generator")
    for name, child, _ in children(node):
        check_keywords(child, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(node.get(key), dict):
            check_keywords(node[key], path + suffix)


def nested_bounds(node, path):
    """Bounds (not Kubernetes' own `required`) inside an embedded type: rare, but never hidden."""
    found = []
    for name, child, _ in children(node):
        found += [f"`{path}.{name}` {b}" for b in [bounds(child, False)] if b]
        found += [nested_bounds(child, f"{path}.{name}")] if child.get("properties") else []
        items = child.get("items")
        if isinstance(items, dict) and items.get("properties"):
            found += [nested_bounds(items, f"{path}.{name}[]")]
    return "; ".join(f for f in found if f)


def rows(node, path, required, out):
    """One row per field, depth first; embedded Kubernetes types name their fields instead of expanding."""
    description = text(node.get("description"))
    items = node.get("items") if node.get("type") == "array" else None
    embedded = KUBERNETES_TYPES.get(path) or (items is not None and KUBERNETES_TYPES.get(path + "[]"))
    if embedded:
        inner = items if path + "[]" in KUBERNETES_TYPES else node
        fields = ", ".join(f"`{name}`" + (" (required)" if req else "") for name, _, req in children(inner))
        group, kind = embedded
        if not description or description == text(inner.get("description")):
            description = text(inner.get("description"))
        note = f"Kubernetes' {kind} ({group}), not expanded here"
        if fields:
            note += f"; its fields: {fields}"
        note += f" (`kubectl explain memcached.{path}`)."
        description = f"{description} {note}".strip()
    limits = bounds(node, required)
    if embedded:
        nested = nested_bounds(items if path + "[]" in KUBERNETES_TYPES else node, path)
        if nested:
            limits = "; ".join([limits] * bool(limits) + [f"inside: {nested}"])
    out.append((path, type_of(node, path), default_of(node), limits, description))
    if embedded:
        return
    for name, child, child_required in children(node):
        rows(child, f"{path}.{name}", child_required, out)
    if items is not None and items.get("properties"):
        for name, child, child_required in children(items):
            rows(child, f"{path}[].{name}", child_required, out)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("properties"):
        for name, child, child_required in children(extra):
            rows(child, f"{path}{{}}.{name}", child_required, out)


def table(schema, top):
    out = []
    node = schema["properties"][top]
    for name, child, required in children(node):
        rows(child, f"{top}.{name}", required, out)
    lines = ["| Field | Type | Default | Bounds | Description |", "|---|---|---|---|---|"]
    for path, kind, default, limits, description in out:
        lines.append(f"| `{path}` | {cell(kind)} | {cell(default) or '—'} | {cell(limits) or '—'} | "
                     f"{cell(description)} |")
    return lines


def differences(a, b, path=""):
    """Paths where two schemas differ."""
    if a == b:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b)):
            found += differences(a.get(key), b.get(key), f"{path}/{key}")
        return found
    return [path or "/"]


def field_path(pointer):
    """`/openAPIV3Schema/properties/spec/properties/replicas/maximum` as `spec.replicas` (maximum)."""
    parts = pointer.strip("/").split("/")[1:]
    path, keyword, i = [], [], 0
    while i < len(parts):
        if parts[i] == "properties" and i + 1 < len(parts):
            path.append(parts[i + 1])
            i += 2
        elif parts[i] in ("items", "additionalProperties"):
            path[-1:] = [(path[-1] if path else "") + ("[]" if parts[i] == "items" else "{}")]
            i += 1
        else:
            keyword.append(parts[i])
            i += 1
    shown = ".".join(path) or "(root)"
    return shown + (f" ({'/'.join(keyword)})" if keyword else "")


def render(crd):
    spec = crd["spec"]
    names = spec["names"]
    versions = spec["versions"]
    storage = next(v for v in versions if v.get("storage"))
    schema = storage["schema"]["openAPIV3Schema"]
    check_keywords(schema, "")
    group, kind = spec["group"], names["kind"]
    lines = [
        f"# {kind} reference",
        "",
        "<!-- Generated by hack/crd_reference.py from deploy/crd.yaml: do not edit by hand. -->",
        "",
        f"The `{kind}` custom resource, as `deploy/crd.yaml` defines it (generated from the API types in",
        "`api/src/types.rs` by `make crd`). `kubectl explain memcached.spec` prints the same descriptions.",
        "Written by `hack/crd_reference.py`; `hack/crd_reference.py --check` fails when this page is stale.",
        "",
        "## The resource",
        "",
        "| | |",
        "|---|---|",
        f"| Group | `{group}` |",
        f"| Kind | `{kind}` (plural `{names['plural']}`, singular `{names.get('singular', '')}`) |",
    ]
    if names.get("shortNames"):
        lines.append("| Short names | " + ", ".join(f"`{n}`" for n in names["shortNames"]) + " |")
    if names.get("categories"):
        lines.append("| Categories | " + ", ".join(f"`{c}`" for c in names["categories"]) + " ("
                     + " and ".join(f"`kubectl get {c}`" for c in names["categories"]) + " list Memcacheds) |")
    lines.append(f"| Scope | {spec['scope']} |")
    conversion = (spec.get("conversion") or {}).get("strategy", "None")
    lines.append(f"| Conversion | `{conversion}`: every served version returns the stored object with its own "
                 "`apiVersion` |" if conversion == "None" else f"| Conversion | `{conversion}` |")
    lines += ["", "| Version | Served | Storage | Deprecated |", "|---|---|---|---|"]
    for version in versions:
        deprecated = "yes: " + cell(version.get("deprecationWarning", "")) if version.get("deprecated") else "no"
        lines.append(f"| `{version['name']}` | {'yes' if version.get('served') else 'no'} | "
                     f"{'yes' if version.get('storage') else 'no'} | {deprecated} |")
    lines.append("")
    for version in versions:
        if version is storage:
            continue
        found = differences(version.get("schema"), storage.get("schema"))
        if not found:
            lines.append(f"`{version['name']}` has exactly the schema of `{storage['name']}`: every field below "
                         "applies to both.")
        else:
            lines.append(f"`{version['name']}` differs from `{storage['name']}` at: "
                         + ", ".join(f"`{field_path(p)}`" for p in found) + " (see `kubectl explain "
                         f"memcached --api-version={group}/{version['name']}`).")
        for key in ("subresources", "additionalPrinterColumns"):
            if version.get(key) != storage.get(key):
                lines.append(f"`{version['name']}` has other `{key}` than `{storage['name']}`.")
    lines.append("")
    subresources = storage.get("subresources") or {}
    if subresources:
        lines += ["## Subresources", ""]
        if "status" in subresources:
            lines.append("* `status`: `status` is written through it, by the controller; a write to the resource "
                         "itself leaves `status` as it is.")
        scale = subresources.get("scale")
        if scale:
            lines.append(f"* `scale`: `kubectl scale` and HorizontalPodAutoscalers set `{scale['specReplicasPath']}`"
                         f" and read `{scale['statusReplicasPath']}` and the label selector "
                         f"`{scale.get('labelSelectorPath', '')}`.")
        lines.append("")
    columns = storage.get("additionalPrinterColumns") or []
    if columns:
        lines += ["## `kubectl get` columns", "",
                  "| Column | From | Type | Shown | Description |", "|---|---|---|---|---|"]
        for column in columns:
            shown = "with `-o wide`" if column.get("priority", 0) > 0 else "always"
            lines.append(f"| {column['name']} | `{column['jsonPath']}` | {column['type']} | {shown} | "
                         f"{cell(text(column.get('description')))} |")
        lines.append("")
    lines += [f"## `{kind}` ({storage['name']})", "", cell(text(schema.get("description"))), ""]
    lines += ["Every field is optional unless marked required. Defaults are not in the schema: the admission",
              "policy fills them in, and the controller computes the same effective spec when the policy did",
              "not run (see [the policy's page](../../policy-wasm/README.md)). Bounds the schema cannot state",
              "(one field against another) are the policy's and are given in the descriptions.", ""]
    for top in ("spec", "status"):
        if top in schema.get("properties", {}):
            node = schema["properties"][top]
            lines += [f"### `{top}`", "", cell(text(node.get("description"))), ""]
            lines += table(schema, top)
            lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale; write nothing")
    parser.add_argument("--crd", type=Path, default=CRD)
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args()
    page = render(yaml.safe_load(args.crd.read_text()))
    shown = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    if args.check:
        committed = args.out.read_text() if args.out.exists() else ""
        if committed != page:
            diff = list(difflib.unified_diff(committed.splitlines(), page.splitlines(),
                                             str(shown), "from " + str(args.crd), lineterm="", n=0))
            for line in diff[:20]:
                print(line, file=sys.stderr)
            if len(diff) > 20:
                print(f"... {len(diff) - 20} more diff lines", file=sys.stderr)
            print(f"{shown} is stale: run hack/crd_reference.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
