"""The README's exit-code table and the code agree: every code of the enum is in the table with the meaning the
reports print, and the table lists no code the enum lacks."""
import re
from pathlib import Path

from gpudiag.cli import ExitCode
from gpudiag.verdict import EXIT_MEANING, FAIL_ON_LEVELS

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_table():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| +(\d+) \| (.+?) \|$", section, flags=re.M)
    return {int(code): meaning for code, meaning in rows}, section


def test_every_exit_code_of_the_enum_is_in_the_readme_table_and_nothing_else():
    table, _ = readme_table()
    assert set(table) == {int(code) for code in ExitCode}


def test_the_readme_meanings_are_the_ones_the_reports_print():
    table, _ = readme_table()
    for code, meaning in EXIT_MEANING.items():
        words = re.sub(r"[`()]", "", table[code]).lower()
        # the report's line is the table's, less its markdown and the parenthesised details
        assert re.sub(r"[`()]", "", meaning.split(" (")[0]).lower().split(",")[0] in words, (code, meaning)


def test_the_readme_names_every_fail_on_level():
    _, section = readme_table()
    assert f"--fail-on {{{','.join(FAIL_ON_LEVELS)}}}" in section
