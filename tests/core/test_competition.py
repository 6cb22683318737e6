"""Competition files: a problem set's list of problems, each checked with its index and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_manager.core.competition import load_competition
from cluster_manager.core.errors import InvalidCompetitionError


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "set" / "a_py").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "set.yaml"
    path.write_text(text)
    return path


def test_reads_problems_relative_to_the_file_with_what_was_written(tmp_path: Path):
    path = write(
        tmp_path,
        "name: Set\nproblems:\n"
        "  - {directory: set/a_py, deadline: 2100-12-31, gpus: [B200, H100], extra: kept}\n",
    )
    competition = load_competition(path)
    assert competition.name == "Set" and competition.deadline == ""
    (problem,) = competition.problems
    assert problem.directory == (tmp_path / "set" / "a_py").resolve()
    assert problem.name == "a_py"  # the folder's name when the file gives none
    assert problem.deadline == "2100-12-31"  # an unquoted date stays the text written
    assert problem.gpus == ("B200", "H100")


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        ("problems: []\n", "problems", "non-empty list"),
        ("problems: [set/a_py]\n", "problems[0]", "mapping"),
        ("problems:\n  - {name: x}\n", "problems[0].directory", "relative path"),
        ("problems:\n  - {directory: ../up}\n", "problems[0].directory", "stay inside"),
        ("problems:\n  - {directory: /etc}\n", "problems[0].directory", "stay inside"),
        ("problems:\n  - {directory: set/a_py, gpus: B200}\n", "problems[0].gpus", "list"),
        ("problems:\n  - {directory: set/a_py, name: [x]}\n", "problems[0].name", "text"),
        (
            "problems:\n  - {directory: set/a_py, name: a}\n  - {directory: set, name: a}\n",
            "problems",
            "'a' appears twice",
        ),
        ("a: &x [1]\nproblems: *x\n", "", "aliases are not allowed"),
        ("- just a list\n", "", "mapping of keys to values"),
    ],
)
def test_refuses_naming_the_key_and_reason(tmp_path: Path, text: str, where: str, reason: str):
    with pytest.raises(InvalidCompetitionError) as err:
        load_competition(write(tmp_path, text))
    message = str(err.value)
    assert message.startswith("invalid competition file: set.yaml")
    if where:
        assert f"set.yaml: {where}:" in message
    assert reason in message


def test_a_symlink_leading_out_of_the_folder_is_refused(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    inside = tmp_path / "problems"
    inside.mkdir()
    (inside / "escape").symlink_to(outside)
    path = inside / "set.yaml"
    path.write_text("problems:\n  - {directory: escape}\n")
    with pytest.raises(InvalidCompetitionError, match="leads outside the file's folder"):
        load_competition(path)


def test_an_unreadable_or_huge_file_is_refused(tmp_path: Path):
    with pytest.raises(InvalidCompetitionError, match="cannot be read"):
        load_competition(tmp_path / "none.yaml")
    huge = tmp_path / "huge.yaml"
    huge.write_text("problems: []\n" + "#" * 300_000)
    with pytest.raises(InvalidCompetitionError, match="over the limit"):
        load_competition(huge)
