#!/usr/bin/env python3
"""`make bench-kwctl`: `kwctl bench` of our policy and of a reference policy in one run.

Usage: kwctl_bench.py KWCTL ROUNDS POLICY REQUEST REFERENCE REFERENCE_REQUEST

Each round benches the policy, the policy with `mutate: false` (judging only:
the difference is what the mutation costs, kwctl's own JSON-patch diff of the
answer included), then the reference, so all see the same machine load. Prints
the median `validate` time kwctl reports for each (read from its stdout; its
stderr only carries the offline Sigstore warning) and the ratios; with several
rounds, also the medians of the per-round ratios. Asserts nothing.
"""

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
        [kwctl, "bench", *settings, "--request-path", request, policy],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=True,
    )
    return validate_median(run.stdout)


def main() -> None:
    kwctl, rounds, policy, request, reference, reference_request = sys.argv[1:]
    ratios, judging_ratios = [], []
    for round_ in range(1, int(rounds) + 1):
        ours = bench(kwctl, policy, request)
        # The same request judged without mutating (settings `mutate: false`):
        # what the mutation costs, kwctl's JSON-patch diff of the answer included.
        judging = bench(kwctl, policy, request, "--settings-json", '{"mutate": false}')
        theirs = bench(kwctl, reference, reference_request)
        ratios.append(ours / theirs)
        judging_ratios.append(judging / theirs)
        print(f"round {round_}: kwctl bench validate median")
        print(f"  {policy} on {request}: {ours:.2f} us")
        print(f"  the same with mutate: false: {judging:.2f} us")
        print(f"  {reference} on {reference_request}: {theirs:.2f} us")
        print(f"  ratio: {ratios[-1]:.2f}x ({judging_ratios[-1]:.2f}x without mutating)")
    if len(ratios) > 1:
        print(
            f"median ratio over {len(ratios)} rounds: {statistics.median(ratios):.2f}x "
            f"({statistics.median(judging_ratios):.2f}x without mutating)"
        )


if __name__ == "__main__":
    main()
