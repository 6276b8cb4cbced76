"""The README and docs/usage.md stay true: every format and command is documented (docs/usage.md), the
Quick start is two commands, the library example runs, and every link between the pages leads somewhere."""

from __future__ import annotations

import re

import logscope.parsers as parsers
from conftest import ROOT
from logscope.cli import app

README = (ROOT / "README.md").read_text()
USAGE = (ROOT / "docs" / "usage.md").read_text()  # the usage reference, split out of the README


def test_every_format_is_in_the_usage_table():
    for m in parsers.FORMATS:
        assert f"| `{m.NAME}` |" in USAGE, m.NAME


def test_every_command_is_documented():
    for cmd in app.registered_commands:
        name = cmd.name or cmd.callback.__name__
        assert f"`logscope {name}" in USAGE, name
        assert cmd.callback.__doc__


def test_quick_start_has_two_bash_blocks():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) >= 2
    assert "logscope analyze samples/" in blocks[0]
    assert "pytest" in blocks[1]


def test_library_example_runs(tmp_path):
    code = re.search(r"```python\n(.*?)```", USAGE.split("## Library use", 1)[1], re.S).group(1)
    code = code.replace('"/tmp/out"', repr(str(tmp_path / "out"))).replace(
        '"samples/spike"', repr(str(ROOT / "samples" / "spike"))
    )
    ns: dict = {}
    exec(compile(code, "docs/usage.md", "exec"), ns)
    assert ns["stats"].height > 0


def test_the_readme_points_to_the_usage_and_every_link_leads_somewhere():
    """README keeps the pitch, the Quick start, the test command and the links; each relative link of README,
    docs/*.md and CONTRIBUTING.md names a file of the repository (and a heading of it, for an anchor)."""
    assert "](docs/usage.md)" in README and "## Tests" in README and len(README.splitlines()) < 120
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve()
            assert dest.exists(), f"{page.name}: {target}"
            if anchor and dest.suffix == ".md":
                heads = re.findall(r"^#+ (.+)$", dest.read_text(), re.M)
                slugs = {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-") for h in heads}
                assert anchor in slugs, f"{page.name}: {target}"


def test_the_readme_shows_the_report_at_1024_px():
    """README's picture of the report is committed under docs/ and was taken at 1024 px (issue #27)."""
    import re
    import struct

    [path] = re.findall(r"!\[[^\]]*\]\((docs/[^)]+\.png)\)", README)
    data = (ROOT / path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert width == 1024 and height >= 800


def test_tables_md_is_generated_from_the_schemas():
    """docs/tables.md is `python -m logscope.schemas`'s output, byte for byte: a table or column added to
    schemas.TABLES without regenerating it fails here (python -m logscope.schemas > docs/tables.md)."""
    from logscope import schemas

    doc = (ROOT / "docs" / "tables.md").read_text(encoding="utf-8")
    assert doc == schemas.markdown() + "\n"
    assert all(f"## `{name}.parquet`" in doc for name in schemas.TABLES)
