"""The README's privacy section names every public fact the code can list in a guarantee, so the
table of facts a default may assume stays complete as facts are added."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACT_NAME = re.compile(r'PublicFact\(\s*"([A-Za-z_][A-Za-z0-9_]*)"')


def _code_fact_names() -> set[str]:
    names = set()
    for package in ("engine", "app", "capture"):
        for path in (ROOT / package).rglob("*.py"):
            names.update(FACT_NAME.findall(path.read_text(encoding="utf-8")))
    return names


def _readme_table_facts() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Public facts a default may assume", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([^`]+)`", row).group(1) for row in rows}


def test_code_names_the_known_facts():
    """The scan finds the facts it must (guards the pattern against silently matching nothing)."""
    assert {"stream_length", "time_range", "reports"} <= _code_fact_names()


def test_readme_table_lists_every_public_fact_of_the_code():
    missing = _code_fact_names() - _readme_table_facts()
    assert not missing, f"README's public-facts table lacks {sorted(missing)}"


def test_readme_table_gives_provenance_and_declaration_for_every_fact():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Public facts a default may assume", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in section.splitlines() if line.startswith("| Fact"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Fact", "Whose defaults use it", "File replay", "Live capture",
        "When assumed, the guarantee says", "To declare it instead"]
    for row in (line for line in section.splitlines() if line.startswith("| `")):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 6 and all(cells), row
