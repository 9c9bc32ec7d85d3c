"""The README's two first commands are what CI runs: install-and-run, then scripts/test."""

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()

RUN_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && servesim run"
TEST_COMMAND = "bash scripts/test"


def _quick_start_commands() -> list[str]:
    start = README.index("## Quick start")
    section = README[start : README.index("\n## ", start + 1)]
    blocks = section.split("```bash\n")[1:]
    return [block.split("```")[0].strip() for block in blocks]


def test_readme_shows_the_two_commands_in_order():
    assert _quick_start_commands()[:2] == [RUN_COMMAND, TEST_COMMAND]


def test_ci_runs_the_readme_test_script():
    lines = [line.strip() for line in CI.splitlines() if not line.lstrip().startswith("#")]
    assert TEST_COMMAND in lines
    assert (ROOT / "scripts" / "test").is_file()
    # The set-up lives in the script, so CI cannot install something the newcomer's command does not.
    assert "apt-get" not in "\n".join(lines)
    assert "apt-get install -y -qq chromium" in (ROOT / "scripts" / "test").read_text()
