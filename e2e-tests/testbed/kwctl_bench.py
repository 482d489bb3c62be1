#!/usr/bin/env python3
"""`make bench-kwctl`: `kwctl bench` of our policy and of Kubewarden's reference policies in one run.

Usage: kwctl_bench.py KWCTL ROUNDS POLICY REQUEST REFERENCE_DIR

REFERENCE_DIR is ../shared/bench (its README.md says what each file is): the
template policy on its own Pod request (the floor of a Rust policy), and two
real mutating policies on their own mutating requests with their settings
(capabilities-psp and psa-label-enforcer: the fair anchors for our mutating
answer, since kwctl turns any mutated answer into a JSON patch on the host).

Each round benches, interleaved so all see the same machine load: our policy
mutating, the same request with `mutate: false` (judging only), the template,
capabilities-psp and psa-label-enforcer. Prints the median `validate` time
kwctl reports for each (read from its stdout; its stderr only carries the
offline Sigstore warning) and the ratios; with several rounds, the medians of
the per-round ratios. The last line is ours / capabilities-psp, both
mutating. Asserts nothing.
"""

import pathlib
import re
import statistics
import subprocess
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# kwctl prints one block per waPC function: "validate [N iterations ...]:" and,
# on the next line, "(sample data: med = 45.12µs, var = ...)".
BLOCK = re.compile(r"^(\S+) \[")
MEDIAN = re.compile(r"med = ([0-9.]+)\s*(ns|µs|us|ms|s)\b")
MICROS = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}


def validate_median(stdout: str) -> float:
    """The median of the `validate` block, in microseconds."""
    function = None
    for line in ANSI.sub("", stdout).splitlines():
        block = BLOCK.match(line)
        if block:
            function = block.group(1)
        median = MEDIAN.search(line)
        if median and function == "validate":
            return float(median.group(1)) * MICROS[median.group(2)]
    raise SystemExit(f"no median for `validate` in kwctl bench output:\n{stdout}")


def bench(kwctl: str, policy: str, request: str, *settings: str) -> float:
    run = subprocess.run(
        [kwctl, "bench", *settings, "--request-path", str(request), str(policy)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=True,
    )
    return validate_median(run.stdout)


def cases(policy: str, request: str, reference: pathlib.Path) -> dict:
    """Name -> (policy, request, kwctl settings flags), in bench order."""
    def anchor(name):
        return (reference / f"{name}.wasm", reference / f"{name}-mutate-request.json",
                ("--settings-path", str(reference / f"{name}-settings.json")))

    return {
        "ours": (policy, request, ()),
        "ours, mutate: false": (policy, request, ("--settings-json", '{"mutate": false}')),
        "template": (reference / "template-policy.wasm", reference / "pod_creation.json", ()),
        "capabilities-psp": anchor("capabilities-psp"),
        "psa-label-enforcer": anchor("psa-label-enforcer"),
    }


# The ratios printed: (numerator, denominator).
RATIOS = [
    ("ours", "template"),
    ("ours, mutate: false", "template"),
    ("ours", "psa-label-enforcer"),
    ("ours", "capabilities-psp"),
]


def main() -> None:
    kwctl, rounds, policy, request, reference = sys.argv[1:]
    benches = cases(policy, request, pathlib.Path(reference))
    per_round = {ratio: [] for ratio in RATIOS}
    for round_ in range(1, int(rounds) + 1):
        medians = {name: bench(kwctl, p, r, *s) for name, (p, r, s) in benches.items()}
        print(f"round {round_}: kwctl bench validate median")
        for name, (p, r, _) in benches.items():
            print(f"  {name} ({pathlib.Path(p).name} on {pathlib.Path(r).name}): {medians[name]:.2f} us")
        for ratio in RATIOS:
            per_round[ratio].append(medians[ratio[0]] / medians[ratio[1]])
            print(f"  {ratio[0]} / {ratio[1]}: {per_round[ratio][-1]:.2f}")
    label = f"median over {rounds} rounds" if int(rounds) > 1 else "result"
    for (numerator, denominator), values in per_round.items():
        print(f"{label}: {numerator} / {denominator} = {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()
