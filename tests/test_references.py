"""Code and user-visible strings cite the papers and the repository's own docs/, never a document
outside the repository: the installed source tree is searched for the names of the specs the docs
were written from, paths into the folder beside the repository and the team's style notes; every
``docs/<file> §N`` cited anywhere in the code or the tests names a file and a section docs/ has."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PACKAGES = ("dptop", "dptop.engine", "dptop.capture", "dptop.resources")

OUTSIDE = re.compile(
    r"(?<![\w/])(?:dpss-eehh|dp-misra-gries|lazyhh|dpsw-sketch|ldp-heavyguardian)\.md"  # a spec, not docs/
    r"|ldp-heavyguardian\.md"
    r"|\.\./shared|/work/shared|shared/spec|shared/seeds"
    r"|HOUSE_STYLE|DEVELOPERS\.md"
    r"|\b[Ss]pec (?:§|lazyhh|dpsw|dpss|ldp)")
CITATION = re.compile(r"docs/([\w-]+\.md)(?: ?§ ?(\d+(?:\.\d+)*))?")
SECTION = re.compile(r"^(?:#{2,4} )?(\d+(?:\.\d+)*)\.? ", re.M)


def outside_references(text: str) -> list[str]:
    return [m.group(0) for m in OUTSIDE.finditer(text)]


def installed_sources() -> list[Path]:
    files = set()
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for folder in spec.submodule_search_locations or ():
            files.update(Path(folder).rglob("*.py"))
    return sorted(files)


def test_the_search_catches_what_it_looks_for():
    """A negative control: each kind of outside reference is found, the docs/ form is not."""
    bad = ['"dpss-eehh.md §6.4"', "(spec §6.3)", "spec lazyhh §6.1", "../shared/pcaps/main", "HOUSE_STYLE.md",
           "ldp-heavyguardian.md §11", "DEVELOPERS.md allows"]
    for text in bad:
        assert outside_references(text), text
    assert not outside_references("docs/dpss-eehh.md §6.4, docs/lazyhh.md §6.1 (001 Thm 3), a SourceSpec spec")


def test_installed_tree_cites_nothing_outside_the_repository():
    sources = installed_sources()
    assert len(sources) > 100 and any(p.name == "lazyhh.py" for p in sources)  # the whole tree, not a stub
    found = [f"{p}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for p in sources for text in [p.read_text(encoding="utf-8")] for m in OUTSIDE.finditer(text)]
    assert not found, "references to documents outside the repository:\n" + "\n".join(found)


def _sections(doc: Path) -> set[str]:
    return {m.group(1).rstrip(".") for m in SECTION.finditer(doc.read_text(encoding="utf-8"))}


@pytest.mark.skipif(not DOCS.is_dir(), reason="docs/ is not beside the tests (an installed copy)")
def test_every_docs_citation_names_a_file_and_section_docs_has():
    sections = {doc.name: _sections(doc) for doc in DOCS.glob("*.md")}
    assert {"README.md", "dpss-eehh.md", "lazyhh.md", "dpsw-sketch.md", "local-dp.md"} <= set(sections)
    cited, missing = 0, []
    for path in installed_sources() + sorted((REPO / "tests").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for m in CITATION.finditer(text):
            cited += 1
            name, section = m.group(1), m.group(2)
            if name not in sections or (section and section.rstrip(".") not in sections[name]):
                missing.append(f"{path.relative_to(REPO) if REPO in path.parents else path}: {m.group(0)}")
    assert cited > 100
    assert not missing, "citations of docs/ sections that do not exist:\n" + "\n".join(missing)
