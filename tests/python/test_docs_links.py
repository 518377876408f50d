"""The docs hold together: every relative link in README.md and docs/*.md
names a file or folder of the repository, and the README's index links
every page in docs/, so that a newcomer finds each from the front page."""

import glob
import os
import re

import pytest

from conftest import ROOT

pytestmark = pytest.mark.native_only

LINK = re.compile(r"\]\(([^)\s]+)\)")


def pages():
    return [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def test_every_relative_link_names_a_file_of_the_repository():
    broken = []
    for page in pages():
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = os.path.normpath(os.path.join(os.path.dirname(page), target.split("#")[0]))
            if not os.path.exists(path) or not path.startswith(ROOT + os.sep):
                broken.append(f"{os.path.relpath(page, ROOT)}: {target}")
    assert not broken, broken


def test_the_readme_links_every_docs_page():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        linked = {os.path.normpath(t) for t in LINK.findall(f.read())}
    missing = [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))
               if os.path.relpath(p, ROOT) not in linked]
    assert not missing, f"docs pages the README's index does not link: {sorted(missing)}"
