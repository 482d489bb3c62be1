#!/usr/bin/env python3
"""Write the Artifact Hub package, artifacthub-pkg.yml: what `kwctl scaffold artifacthub` makes of
metadata.yml and questions-ui.yml, plus `readme:`, the policy's own page (policy-wasm/README.md).

artifacthub-pkg.yml sits at the workspace root, beside the root README.md (the project's, the
`make demo` page): without `readme:` Artifact Hub would show that one. Its package format takes the
readme inline ("readme: optional, can be provided from a README.md file as well",
artifacthub/hub docs/metadata/artifacthub-pkg.yml), so it is written in.

createdAt: kwctl stamps the time of the run; while the package version stays the one already
written, the date of that version is kept, so regenerating it changes nothing but real changes.

usage: hack/artifacthub-pkg.py [-o OUTPUT] (kwctl from $KWCTL, else PATH; OUTPUT defaults to
artifacthub-pkg.yml at the root)."""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "policy-wasm/README.md"


def readme_block(text):
    """`readme: |` with the README as a literal block scalar (clip chomping: it ends in one newline)."""
    if not text.endswith("\n") or text.endswith("\n\n"):
        sys.exit(f"{README}: must end with exactly one newline (the block scalar keeps one)")
    lines = ["  " + line if line else "" for line in text.split("\n")[:-1]]
    return "readme: |\n" + "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", default=str(ROOT / "artifacthub-pkg.yml"))
    output = pathlib.Path(parser.parse_args().output)
    kwctl = os.environ.get("KWCTL") or shutil.which("kwctl")
    if not kwctl:
        sys.exit("kwctl not found: put it on PATH or set KWCTL")
    with tempfile.TemporaryDirectory() as tmp:
        scaffolded = pathlib.Path(tmp) / "artifacthub-pkg.yml"
        subprocess.run([kwctl, "scaffold", "artifacthub", "-m", str(ROOT / "metadata.yml"),
                        "-q", str(ROOT / "questions-ui.yml"), "-o", str(scaffolded)], check=True)
        text = scaffolded.read_text()
    if "\nreadme:" in text:
        sys.exit("kwctl now writes readme: itself; compare it with policy-wasm/README.md and drop this step")
    previous = ROOT / "artifacthub-pkg.yml"
    if previous.exists():
        old = yaml.safe_load(previous.read_text())
        if old.get("version") == yaml.safe_load(text)["version"] and old.get("createdAt"):
            created = re.search(r"^createdAt: .*$", previous.read_text(), re.M).group(0)
            text = re.sub(r"^createdAt: .*$", lambda _: created, text, count=1, flags=re.M)
    if not text.endswith("\n"):
        text += "\n"
    text += readme_block(README.read_text())
    assert yaml.safe_load(text)["readme"] == README.read_text()
    output.write_text(text)


if __name__ == "__main__":
    main()
