"""Code and user-visible strings cite the papers and the repository's own docs/, never a document
outside the repository: the installed source tree is searched for the names of the specs the docs
were written from, paths into the folder beside the repository, the papers by that folder's numbers
(``seed 002``: the docs name them ``paper 002``) and the team's style notes; every ``docs/<file> §N``
cited anywhere in the code or the tests names a file and a section docs/ has; in the repository's
app/, engine/ and capture/, every ``<name>.md`` named is a file of the repository and every bare
``§N`` (not a paper's or an RFC's) is a section of a docs/ file the same module cites."""
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
    r"|\.\./shared|/work/shared|shared/spec|shared/seeds|shared/pcaps|(?<![\w.])seeds/|(?<![\w.])spec/"
    r"|\bseeds? \d{3}\b"  # a paper by the number of its folder beside the repository
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
           "ldp-heavyguardian.md §11", "DEVELOPERS.md allows", "(seed 002 §8)", "seeds/004", "spec/lazyhh"]
    for text in bad:
        assert outside_references(text), text
    assert not outside_references("docs/dpss-eehh.md §6.4, docs/lazyhh.md §6.1 (001 Thm 3), a SourceSpec spec, "
                                  "paper 002 §8, seed 7, the seeds 1..3, find_spec/x")


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


SOURCE_FOLDERS = ("app", "engine", "capture")
MD_NAME = re.compile(r"(?<![\w/.-])((?:\.\./|[\w-]+/)*[\w-]+\.md)\b")
BARE_SECTION = re.compile(r"(?<![\w.])§ ?(\d+(?:\.\d+)*)")
NOT_DOCS = re.compile(r"(?:\b\d{3}|RFC \d+|Alg \d+ /|\.md)\s?$")
"""What a ``§`` following it belongs to: a paper (``002 §8``), an RFC, or a cited file (checked apart)."""


def unresolved_references(root: Path) -> list[str]:
    """Every ``<name>.md`` in the ``.py`` files of ``root``'s app/, engine/ and capture/ that is not a file
    of ``root`` (relative to it or to the module's folder), and every bare ``§N`` that is no section of
    a docs/ file the same module cites ("where: what")."""
    docs = {doc.name: _sections(doc) for doc in (root / "docs").glob("*.md")}
    found = []
    for path in sorted(p for folder in SOURCE_FOLDERS for p in (root / folder).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = lambda m: f"{path.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}"  # noqa: E731
        for m in MD_NAME.finditer(text):
            if not ((root / m.group(1)).is_file() or (path.parent / m.group(1)).is_file()):
                found.append(f"{where(m)}: {m.group(1)} is no file of the repository")
        cited = {m.group(1) for m in CITATION.finditer(text)}
        for m in BARE_SECTION.finditer(text):
            if NOT_DOCS.search(text[max(0, m.start() - 12):m.start()]):
                continue
            if not any(m.group(1) in docs.get(name, ()) for name in cited):
                found.append(f"{where(m)}: §{m.group(1)} is no section of {', '.join(sorted(cited)) or 'a cited docs/ file'}")
    return found


@pytest.mark.skipif(not DOCS.is_dir(), reason="docs/ is not beside the tests (an installed copy)")
def test_every_file_and_bare_section_the_code_names_is_in_the_repository():
    assert not unresolved_references(REPO), "\n".join(unresolved_references(REPO))


@pytest.mark.skipif(not DOCS.is_dir(), reason="docs/ is not beside the tests (an installed copy)")
def test_the_repository_search_catches_an_injected_reference(tmp_path):
    """A negative control on a copy of docs/ and one module: each injected reference is reported, the
    module's correct ones are not."""
    (tmp_path / "docs").mkdir()
    for doc in DOCS.glob("*.md"):
        (tmp_path / "docs" / doc.name).write_text(doc.read_text(encoding="utf-8"), encoding="utf-8")
    module = tmp_path / "engine" / "mech.py"
    module.parent.mkdir()
    good = '"""A mechanism (docs/lazyhh.md §6.1; §6.3, 001 §4, RFC 1661 §6.5)."""\n'
    module.write_text(good, encoding="utf-8")
    assert unresolved_references(tmp_path) == []
    injected = ["lazyhh.md", "docs" + "/absent.md", "§9.9", "ARCHITECTURE.md"]  # not a citation of this file
    module.write_text(good + "".join(f"X = {text!r}\n" for text in injected), encoding="utf-8")
    found = unresolved_references(tmp_path)
    assert len(found) == len(injected), found
    for text in injected:
        assert sum(f": {text} is no" in line for line in found) == 1, (text, found)
