"""docs/reference.md is generated from the CLI; it must match what the generator produces now."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "docs" / "gen_reference.py"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", GEN)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_is_up_to_date():
    fresh = _generator().render()
    current = (ROOT / "docs" / "reference.md").read_text()
    assert current == fresh, "docs/reference.md is stale: run `python docs/gen_reference.py`"


def test_reference_lists_every_command_and_option():
    from typer.main import get_command

    from splitplan.cli import app

    text = _generator().render()
    root = get_command(app)

    def walk(path, cmd):
        assert f"`splitplan {' '.join(path)}`" in text if path else True
        for p in cmd.params:
            if getattr(p, "param_type_name", "option") == "option":
                for opt in p.opts:
                    assert f"`{opt}`" in text, f"{' '.join(path)} {opt} missing"
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk([*path, name], sub)

    walk([], root)


def test_check_mode_detects_staleness(tmp_path, monkeypatch):
    gen = _generator()
    stale = tmp_path / "reference.md"
    stale.write_text("# old\n")
    monkeypatch.setattr(gen, "REFERENCE", stale)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    assert stale.read_text() == gen.render()


def _anchors(markdown: str) -> set[str]:
    """GitHub-style heading anchors of a Markdown text (code blocks skipped)."""
    import re

    out, fenced = set(), False
    for line in markdown.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            out.add(slug)
    return out


def test_relative_links_in_docs_resolve():
    import re

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    link = re.compile(r"\]\(([^)\s]+)\)")
    checked = 0
    for page in pages:
        text = page.read_text()
        for target in link.findall(text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.relative_to(ROOT)}: broken link {target}"
            if anchor and dest.suffix == ".md":
                assert anchor in _anchors(dest.read_text()), f"{page.relative_to(ROOT)}: no anchor {target}"
            checked += 1
    assert checked >= 20


def test_background_documents_every_simulator_setting():
    from dataclasses import fields

    from splitplan.sim.config import SimConfig

    text = (ROOT / "docs" / "background.md").read_text()
    missing = [f.name for f in fields(SimConfig) if f"| `{f.name}` |" not in text]
    assert not missing, f"docs/background.md lacks simulator settings {missing}"
