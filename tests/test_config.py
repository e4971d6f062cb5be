"""Where settings come from: the files found walking up, the sources of each value, the
warnings for misspelt variables, and the README's table of settings read from the fields."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from toolbudget.errors import InputError
from toolbudget.policy import (
    ConfigWarning,
    Policy,
    Source,
    config_files,
    setting_docs,
    settings_table,
)

REPO = Path(__file__).resolve().parent.parent
MISSPELT = {"test_config.py", "test_cli_config.py"}  # their misspelt names are meant to warn


def _project(tmp_path: Path) -> Path:
    """A git checkout with a nested source folder."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    deep = root / "src" / "pkg" / "deep"
    deep.mkdir(parents=True)
    return root


def test_settings_are_found_from_a_subdirectory(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "toolbudget.toml").write_text("result_max_chars = 1234\n")
    deep = root / "src" / "pkg" / "deep"
    assert config_files(deep) == ((root / "toolbudget.toml").absolute(),)
    assert Policy.load(deep, env={}).result_max_chars == 1234


def test_pyproject_table_is_found_from_a_subdirectory(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "pyproject.toml").write_text("[tool.toolbudget]\nturn-budget-chars = 4321\n")
    loaded = Policy.load_with_sources(root / "src" / "pkg", env={})
    assert loaded.policy.turn_budget_chars == 4321
    assert loaded.sources["turn_budget_chars"] == Source(
        "pyproject", str((root / "pyproject.toml").absolute())
    )


def test_the_nearest_directory_wins_and_stops_the_walk(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "toolbudget.toml").write_text("result_max_chars = 1000\nerror_max_chars = 60000\n")
    inner = root / "src"
    (inner / "toolbudget.toml").write_text("result_max_chars = 2000\n")
    policy = Policy.load(inner / "pkg", env={})
    assert policy.result_max_chars == 2000
    assert policy.error_max_chars == 50_000  # the outer file is not read at all


def test_a_pyproject_without_our_table_does_not_stop_the_walk(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "toolbudget.toml").write_text("result_max_chars = 1000\n")
    (root / "src" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    assert Policy.load(root / "src" / "pkg", env={}).result_max_chars == 1000


def test_both_files_in_one_directory_apply_and_toolbudget_toml_wins(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "pyproject.toml").write_text("[tool.toolbudget]\nresult_max_chars = 1\nerror_max_chars = 7\n")
    (root / "toolbudget.toml").write_text("result_max_chars = 2\n")
    loaded = Policy.load_with_sources(root / "src", env={})
    assert loaded.policy.result_max_chars == 2
    assert loaded.policy.error_max_chars == 7
    assert loaded.sources["result_max_chars"].kind == "toolbudget.toml"
    assert loaded.sources["error_max_chars"].kind == "pyproject"
    assert [p.name for p in loaded.files] == ["pyproject.toml", "toolbudget.toml"]


def test_the_walk_stops_at_the_top_of_a_git_checkout(tmp_path: Path) -> None:
    (tmp_path / "toolbudget.toml").write_text("result_max_chars = 1\n")  # outside the checkout
    root = _project(tmp_path)
    assert config_files(root / "src") == ()
    assert Policy.load(root / "src", env={}).result_max_chars == 20_000


def test_without_a_checkout_the_walk_reaches_the_directory_above(tmp_path: Path) -> None:
    (tmp_path / "toolbudget.toml").write_text("result_max_chars = 3\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert Policy.load(deep, env={}).result_max_chars == 3


def test_an_unknown_key_found_above_is_still_an_error(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "toolbudget.toml").write_text("result_max_char = 3\n")
    with pytest.raises(InputError, match="unknown toolbudget setting 'result_max_char'"):
        Policy.load(root / "src", env={})


def test_each_value_says_where_it_came_from(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "toolbudget.toml").write_text("result_max_chars = 1000\ncompaction = 'eager'\n")
    loaded = Policy.load_with_sources(
        root,
        env={"TOOLBUDGET_COMPACTION": "off", "TOOLBUDGET_ERROR_MAX_CHARS": "9000"},
        flags={"result_max_chars": 5, "turn_budget_chars": None},
        preview_tail_chars=10,
    )
    sources = loaded.sources
    assert sources["result_max_chars"] == Source("flag", "--result-max-chars")
    assert loaded.policy.result_max_chars == 5  # a flag wins over the file
    assert sources["compaction"] == Source("environment", "TOOLBUDGET_COMPACTION")
    assert loaded.policy.compaction == "off"
    assert sources["error_max_chars"] == Source("environment", "TOOLBUDGET_ERROR_MAX_CHARS")
    assert sources["preview_tail_chars"] == Source("arguments", "Policy.load")
    assert sources["turn_budget_chars"] == Source("default")  # a flag left out is not a source
    assert set(sources) == {d.name for d in setting_docs()}
    with pytest.raises(TypeError):
        sources["store"] = Source("flag")  # type: ignore[index]


def test_a_bad_flag_is_named_as_a_flag(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--result-max-chars must be a whole number"):
        Policy.load_with_sources(tmp_path, env={}, flags={"result_max_chars": "lots"})


def test_a_misspelt_variable_warns_with_the_closest_name(tmp_path: Path) -> None:
    with pytest.warns(ConfigWarning, match="did you mean TOOLBUDGET_RESULT_MAX_CHARS\\?") as caught:
        policy = Policy.load(tmp_path, env={"TOOLBUDGET_RESULT_MAX_CHAR": "10"})
    assert "TOOLBUDGET_RESULT_MAX_CHAR is not a toolbudget setting" in str(caught[0].message)
    assert policy.result_max_chars == 20_000
    assert issubclass(ConfigWarning, UserWarning)


def test_a_far_off_variable_warns_without_a_guess(tmp_path: Path) -> None:
    with pytest.warns(ConfigWarning, match="'toolbudget config' lists the settings"):
        Policy.load(tmp_path, env={"TOOLBUDGET_ZZZ": "1"})


def _read_names() -> set[str]:
    """Every ``TOOLBUDGET_...`` name the code, tests, benchmarks and scripts mention, bar misspellings."""
    names: set[str] = set()
    for folder in ("src", "tests", "bench", "scripts"):
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".sh", ".md", ".toml"} and path.name not in MISSPELT:
                names.update(
                    re.findall(r"TOOLBUDGET_[A-Z][A-Z0-9_]*[A-Z0-9]", path.read_text(errors="replace"))
                )
    return names


def test_names_the_project_reads_do_not_warn(tmp_path: Path) -> None:
    # Names made by tests for subclasses of Policy are not read by Policy itself.
    names = {n for n in _read_names() if not n.startswith("TOOLBUDGET_EXTRA")}
    assert {"TOOLBUDGET_SHARED", "TOOLBUDGET_STORE", "TOOLBUDGET_STORE_TIMEOUT"} <= names
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        Policy.load(tmp_path, env=dict.fromkeys(names, ""))


def test_every_setting_is_documented() -> None:
    docs = setting_docs()
    assert len({d.name for d in docs}) == len(docs)
    for doc in docs:
        assert doc.meaning, f"{doc.name} has no meaning for the README"
        assert doc.default, f"{doc.name} has no default to show"
        assert doc.env == "TOOLBUDGET_" + doc.name.upper()


def test_the_readme_table_is_the_one_the_fields_make() -> None:
    readme = (REPO / "README.md").read_text()
    budgets = readme.split("\n## Budgets\n", 1)[1].split("\n## ", 1)[0]
    tables = re.findall(r"(?m)^\|.*\|\n(?:^\|.*\|\n)+", budgets)
    assert tables, "the Budgets section of README.md has no table"
    assert tables[0] == settings_table(), (
        "the settings table in README.md differs from Policy's fields; paste the output of "
        "python -c 'from toolbudget.policy import settings_table; print(settings_table(), end=\"\")'"
    )
