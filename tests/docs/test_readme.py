"""The README: short, its two first commands are what CI runs (install-and-run, then scripts/test), its links
resolve, and scripts/test builds the documentation site strictly."""

import re

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()
SCRIPT = (ROOT / "scripts" / "test").read_text()
GETTING_STARTED = (ROOT / "docs" / "getting-started.md").read_text()

RUN_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && servesim run"
TEST_COMMAND = "bash scripts/test"
MAX_README_LINES = 150


def _bash_blocks(text: str, heading: str) -> list[str]:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    blocks = section.split("```bash\n")[1:]
    return [block.split("```")[0].strip() for block in blocks]


def test_readme_shows_the_two_commands_in_order():
    assert _bash_blocks(README, "## Quick start")[:2] == [RUN_COMMAND, TEST_COMMAND]


def test_getting_started_shows_the_same_two_commands():
    assert _bash_blocks(GETTING_STARTED, "## Install and run")[:2] == [RUN_COMMAND, TEST_COMMAND]


def test_readme_is_short():
    assert len(README.splitlines()) <= MAX_README_LINES


def test_readme_links_and_picture_resolve():
    """Relative links (into docs/, so they work on GitHub) and the report picture point at files in the tree."""
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert "docs/images/run_report.png" in local
    assert any(t.startswith("docs/") and t.endswith(".md") for t in local)
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_ci_runs_the_readme_test_script():
    lines = [line.strip() for line in CI.splitlines() if not line.lstrip().startswith("#")]
    assert TEST_COMMAND in lines
    assert (ROOT / "scripts" / "test").is_file()
    # The set-up lives in the script, so CI cannot install something the newcomer's command does not.
    assert "apt-get" not in "\n".join(lines)
    assert "apt-get install -y -qq chromium" in SCRIPT


def test_the_test_script_builds_the_site_strictly_outside_the_tree():
    build = [line for line in SCRIPT.splitlines() if "mkdocs build" in line and not line.lstrip().startswith("#")]
    assert build and "--strict" in build[0] and "--site-dir" in build[0]
    assert "site/" in (ROOT / ".gitignore").read_text().split()
