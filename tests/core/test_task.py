"""The task loader: task folders, problem-set layouts, zips and their limits."""

from __future__ import annotations

import io
import json
import os
import struct
import time
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_manager.core.errors import ClusterManagerError, InvalidTaskError
from cluster_manager.core.models import (
    SUBMISSION_SOURCE,
    CudaConfig,
    Language,
    RankingBy,
    Task,
    TaskFile,
)
from cluster_manager.core.task import (
    TASK_YAML,
    TaskLimits,
    load_task,
    load_task_zip_bytes,
    parse_task_yaml,
)
from cluster_manager.core.task_sources import problem_set_root

MiB = 1024 * 1024
DELETE = object()

REFERENCE = "def ref_kernel(data):\n    return data\n"
EVAL = "import sys\nprint(sys.argv)\n"
TEMPLATE = "def custom_kernel(data):\n    ...\n"
PY_FILES = {"reference.py": REFERENCE, "eval.py": EVAL}

MAIN_CU = '#include "kernel.h"\nint main() { return 0; }\n'
KERNEL_H = "#pragma once\nvoid custom_kernel(float* x);\n"
CU_FILES = {"main.cu": MAIN_CU, "kernel.h": KERNEL_H}


# --- helpers ---------------------------------------------------------------------------------


class _NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(spec: Mapping[str, Any]) -> str:
    return yaml.dump(dict(spec), Dumper=_NoAliasDumper, sort_keys=False)


def _apply(spec: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in changes.items():
        if value is DELETE:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def py_spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "lang": "py",
        "files": [
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "reference.py", "source": "reference.py"},
            {"name": "eval.py", "source": "eval.py"},
        ],
        "config": {"main": "eval.py"},
        "tests": [{"size": 1023, "seed": 4242}, {"size": 8, "dtype": "half"}],
        "benchmarks": [{"size": 16384, "seed": 54352}],
    }
    return _apply(spec, changes)


def cu_spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "lang": "cu",
        "files": [
            {"name": "submission.cu", "source": SUBMISSION_SOURCE},
            {"name": "main.cu", "source": "main.cu"},
            {"name": "include/kernel.h", "source": "kernel.h"},
        ],
        "config": {
            "sources": ["main.cu", "submission.cu"],
            "include_dirs": ["include"],
            "defines": {"N": "4", "BLOCK": 256},
            "compile_flags": ["-O3", "--use_fast_math"],
        },
        "tests": [{"size": 8}],
        "benchmarks": [{"size": 1024}, {"size": 4096}],
    }
    return _apply(spec, changes)


def write_task(
    folder: Path,
    spec: Mapping[str, Any] | str | bytes | None,
    files: Mapping[str, str | bytes] = PY_FILES,
) -> Path:
    """Writes task.yml (a mapping is dumped as YAML, text/bytes written as is) and `files`."""
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(spec, Mapping):
        (folder / TASK_YAML).write_text(dump(spec), encoding="utf-8")
    elif isinstance(spec, str):
        (folder / TASK_YAML).write_text(spec, encoding="utf-8")
    elif isinstance(spec, bytes):
        (folder / TASK_YAML).write_bytes(spec)
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def zip_bytes(
    entries: Mapping[str, str | bytes] | Iterable[tuple[str | zipfile.ZipInfo, str | bytes]],
    *,
    compression: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    items = entries.items() if isinstance(entries, Mapping) else entries
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as archive:
        for name, data in items:
            if isinstance(name, zipfile.ZipInfo):
                name.compress_type = compression
            archive.writestr(name, data)
    return buf.getvalue()


def task_entries(
    prefix: str = "", spec: Mapping[str, Any] | None = None, files: Mapping[str, str] = PY_FILES
) -> dict[str, str]:
    entries = {f"{prefix}{TASK_YAML}": dump(py_spec() if spec is None else spec)}
    entries.update({f"{prefix}{name}": content for name, content in files.items()})
    return entries


def invalid(call: Any, *args: Any, **kwargs: Any) -> InvalidTaskError:
    with pytest.raises(InvalidTaskError) as info:
        call(*args, **kwargs)
    err = info.value
    # The message always names the file, the key (when there is one) and the reason.
    assert str(err).startswith("invalid task: ")
    assert err.file in str(err)
    if err.key:
        assert f"{err.file}: {err.key}: {err.reason}" in str(err)
    assert err.reason and str(err).endswith(err.reason)
    return err


def load_invalid_spec(tmp_path: Path, spec: Any, files: Mapping[str, Any] = PY_FILES):
    return invalid(load_task, write_task(tmp_path / "task1", spec, files))


def file_content(task: Task, name: str) -> str | None:
    return next(f.content for f in task.files if f.name == name)


# --- a valid Python task ----------------------------------------------------------------------


def test_valid_python_task_loads_everything(tmp_path: Path) -> None:
    spec = py_spec(
        templates={"Python": "template.py"},
        description="Sum of a vector.\nSecond line.\n",
        ranking_by="geom",
        test_timeout=60,
        benchmark_timeout=120.5,
        ranked_timeout=3600,
    )
    folder = write_task(tmp_path / "vectorsum", spec, {**PY_FILES, "template.py": TEMPLATE})

    task = load_task(folder)

    assert task.name == "vectorsum"
    assert task.lang is Language.PYTHON
    assert [f.name for f in task.files] == ["submission.py", "reference.py", "eval.py"]
    assert task.files[0] == TaskFile("submission.py", None)
    assert task.files[0].is_submission
    assert task.submission_name == "submission.py"
    assert file_content(task, "reference.py") == REFERENCE
    assert file_content(task, "eval.py") == EVAL
    assert not task.files[1].is_submission
    assert task.tests == ({"size": 1023, "seed": 4242}, {"size": 8, "dtype": "half"})
    assert task.benchmarks == ({"size": 16384, "seed": 54352},)
    assert all(isinstance(c, dict) for c in task.tests + task.benchmarks)
    assert task.main == "eval.py"
    assert task.cuda is None
    assert task.templates == {"Python": TEMPLATE}
    assert task.description == "Sum of a vector.\nSecond line.\n"
    assert task.ranking_by is RankingBy.GEOM
    assert task.test_timeout == 60.0
    assert task.benchmark_timeout == 120.5
    assert task.ranked_timeout == 3600.0
    assert isinstance(task.test_timeout, float)
    assert task.multi_gpu is False


def test_defaults_when_optional_keys_are_absent(tmp_path: Path) -> None:
    folder = write_task(tmp_path / "t", py_spec(config=DELETE))

    task = load_task(str(folder))  # str paths are accepted too

    assert task.main is None
    assert task.test_timeout == task.benchmark_timeout == task.ranked_timeout == 180.0
    assert task.ranking_by is RankingBy.LAST
    assert task.multi_gpu is False
    assert task.templates == {}
    assert task.description == ""


def test_empty_config_means_builtin_harness(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path / "t", py_spec(config=None)))
    assert task.main is None


@pytest.mark.parametrize("ranking", ["last", "mean", "geom"])
def test_ranking_by_values(tmp_path: Path, ranking: str) -> None:
    task = load_task(write_task(tmp_path / "t", py_spec(ranking_by=ranking)))
    assert task.ranking_by == RankingBy(ranking)


def test_multi_gpu_task_with_world_sizes(tmp_path: Path) -> None:
    spec = py_spec(
        multi_gpu=True,
        tests=[{"size": 8, "world_size": 2}],
        benchmarks=[{"size": 64, "world_size": 4}],
    )
    task = load_task(write_task(tmp_path / "t", spec))
    assert task.multi_gpu is True
    assert task.tests[0]["world_size"] == 2
    assert task.benchmarks[0]["world_size"] == 4


def test_files_in_subfolders_and_negative_and_big_ints(tmp_path: Path) -> None:
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "lib/helpers.py", "source": "src/helpers.py"},
        ],
        config=None,
        tests=[{"offset": -3, "seed": 2**70}],
    )
    task = load_task(write_task(tmp_path / "t", spec, {"src/helpers.py": "X = 1\n"}))
    assert file_content(task, "lib/helpers.py") == "X = 1\n"
    assert task.tests == ({"offset": -3, "seed": 2**70},)


def test_yaml_anchor_without_alias_is_fine(tmp_path: Path) -> None:
    text = dump(py_spec()).replace("tests:", "tests: &cases", 1)
    assert "&cases" in text
    task = load_task(write_task(tmp_path / "t", text))
    assert len(task.tests) == 2


def test_public_fixture_task_loads() -> None:
    folder = Path(__file__).resolve().parents[1] / "fixtures" / "problemset" / "vectorsum_py"
    task = load_task(folder)
    assert task.name == "vectorsum_py"
    assert task.main == "eval.py"
    assert task.ranking_by is RankingBy.GEOM
    assert task.submission_name == "submission.py"
    eval_text = (folder.parent / "eval.py").read_text(encoding="utf-8")
    assert file_content(task, "eval.py") == eval_text
    assert (task.test_timeout, task.benchmark_timeout, task.ranked_timeout) == (60, 120, 120)


# --- problem-set layout -----------------------------------------------------------------------


def problem_set(tmp_path: Path, source: str) -> Path:
    """problems/set/eval.py + problems/set/task1/task.yml whose eval.py comes from `source`;
    without a marker the root is the task's grandparent, `problems/`."""
    root = tmp_path / "problems" / "set"
    write_task(root, None, {"eval.py": "# shared eval\n"})
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "eval.py", "source": source},
        ]
    )
    return write_task(root / "task1", spec, {})


def test_sibling_source_of_problem_set_loads(tmp_path: Path) -> None:
    task = load_task(problem_set(tmp_path, "../eval.py"))
    assert file_content(task, "eval.py") == "# shared eval\n"
    assert task.name == "task1"


@pytest.mark.reliability(
    "Bad input",
    "task.yml source `../../../x.py` leading out of the problem sets' root",
    "refused: names task.yml, key files[1].source, the source and 'outside the root'",
)
def test_source_escaping_problem_set_is_refused(tmp_path: Path, record_property) -> None:
    (tmp_path / "x.py").write_text("secret = 1\n")  # exists: refusal is about the path
    err = invalid(load_task, problem_set(tmp_path, "../../../x.py"))
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, "files[1].source")
    assert "outside the root" in err.reason
    assert "../../../x.py" in err.reason


def sibling_sets(tmp_path: Path, marker: str | None) -> Path:
    """repo/problems/{pmpp_v2/utils.py, linalg/qr/task.yml naming ../../pmpp_v2/utils.py}: the
    public linalg tasks' shape; `marker` is what marks the root (.git or a competition YAML)."""
    problems = tmp_path / "repo" / "problems"
    write_task(problems / "pmpp_v2", None, {"utils.py": "shared = 1\n"})
    if marker == ".git":
        (tmp_path / "repo" / ".git").mkdir()
    elif marker == "yaml":
        (problems / "linalg.yaml").write_text("name: L\nproblems:\n  - directory: linalg/qr\n")
        (problems / "notes.yaml").write_text("just: notes\n")  # not a competition YAML
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "eval.py", "source": "eval.py"},
            {"name": "utils.py", "source": "../../pmpp_v2/utils.py"},
        ]
    )
    return write_task(problems / "linalg" / "qr", spec, {"eval.py": "# eval\n"})


@pytest.mark.parametrize("marker", [".git", "yaml"])
def test_a_source_from_a_sibling_problem_set_loads_under_the_marked_root(
    tmp_path: Path, marker: str
) -> None:
    folder = sibling_sets(tmp_path, marker)
    root = tmp_path / "repo" if marker == ".git" else tmp_path / "repo" / "problems"
    assert problem_set_root(folder) == root.resolve()
    assert file_content(load_task(folder), "utils.py") == "shared = 1\n"


def test_without_a_marker_the_root_is_the_grandparent(tmp_path: Path) -> None:
    folder = sibling_sets(tmp_path, None)
    assert problem_set_root(folder) == (tmp_path / "repo" / "problems").resolve()
    assert file_content(load_task(folder), "utils.py") == "shared = 1\n"


@pytest.mark.reliability(
    "Bad input",
    "a root given by the organiser (`--root`) that the task's sibling source lies outside",
    "refused: key files[2].source, 'outside the root' and the root's folder name, no server path",
)
def test_an_explicit_root_bounds_the_sources(tmp_path: Path, record_property) -> None:
    folder = sibling_sets(tmp_path, ".git")
    err = invalid(lambda path: load_task(path, root=folder.parent), folder)
    record_property("observed", str(err))
    assert err.key == "files[2].source" and "outside the root" in err.reason
    assert f"the root, {folder.parent.name}/" in err.reason and str(tmp_path) not in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task.yml source given as an absolute path",
    "refused: names task.yml, key files[1].source and 'absolute path … is not allowed'",
)
@pytest.mark.parametrize("source", ["/etc/hostname", "\\evil.py", "C:/evil.py", "c:evil.py"])
def test_absolute_source_is_refused(tmp_path: Path, source: str, record_property) -> None:
    err = invalid(load_task, problem_set(tmp_path, source))
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, "files[1].source")
    assert "absolute path" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task.yml source with a backslash separator (`..\\\\eval.py`)",
    "refused: key files[1].source, 'may only use '/' as separator'",
)
def test_backslash_source_is_refused(tmp_path: Path, record_property) -> None:
    err = invalid(load_task, problem_set(tmp_path, "..\\eval.py"))
    record_property("observed", str(err))
    assert err.key == "files[1].source"
    assert "may only use '/'" in err.reason


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
@pytest.mark.reliability(
    "Bad input",
    "task folder file that is a symlink to a file outside the problem set",
    "refused: key files[1].source, 'outside the root'; the target is not read",
)
def test_symlink_leaving_problem_set_is_refused(tmp_path: Path, record_property) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("secret = 1\n")
    folder = problem_set(tmp_path, "link.py")
    (folder / "link.py").symlink_to(outside)
    err = invalid(load_task, folder)
    record_property("observed", str(err))
    assert err.key == "files[1].source"
    assert "outside the root" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task file over the per-file size cap (2000 bytes, cap 1000)",
    "refused: names reference.py, '2000 bytes is over the limit of 1000'",
)
def test_source_over_file_size_cap_is_refused(tmp_path: Path, record_property) -> None:
    folder = write_task(tmp_path / "t", py_spec(), {**PY_FILES, "reference.py": "x" * 2000})
    err = invalid(load_task, folder, limits=TaskLimits(file_bytes=1000))
    record_property("observed", str(err))
    assert err.file == "reference.py"
    assert "2000 bytes is over the limit of 1000" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task path that does not exist",
    "refused: names the path, 'no such file or folder'",
)
def test_missing_path_is_refused(tmp_path: Path, record_property) -> None:
    err = invalid(load_task, tmp_path / "nope")
    record_property("observed", str(err))
    assert "no such file or folder" in err.reason


# --- CUDA -------------------------------------------------------------------------------------


def test_cuda_task_loads_config(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path / "cu_task", cu_spec(), CU_FILES))
    assert task.lang is Language.CUDA
    assert task.main is None
    assert task.submission_name == "submission.cu"
    assert file_content(task, "include/kernel.h") == KERNEL_H
    assert task.cuda == CudaConfig(
        sources=("main.cu", "submission.cu"),
        include_dirs=("include",),
        defines={"N": "4", "BLOCK": "256"},
        compile_flags=("-O3", "--use_fast_math"),
    )


def test_cuda_task_minimal_config(tmp_path: Path) -> None:
    spec = cu_spec(config={"sources": ["submission.cu"]})
    task = load_task(write_task(tmp_path / "t", spec, CU_FILES))
    assert task.cuda == CudaConfig(sources=("submission.cu",))


@pytest.mark.parametrize(
    ("config", "key", "reason"),
    [
        pytest.param({}, "config.sources", "must list its sources", id="no-config"),
        pytest.param({"sources": []}, "config.sources", "must list its sources", id="empty"),
        pytest.param(
            {"sources": ["missing.cu"]}, "config.sources", "'missing.cu' is not one", id="unlisted"
        ),
        pytest.param({"sources": "main.cu"}, "config.sources", "list of strings", id="not-list"),
        pytest.param({"sources": [1]}, "config.sources", "list of strings", id="not-str"),
        pytest.param(
            {"sources": ["main.cu"], "defines": {"X": True}},
            "config.defines",
            "strings or ints",
            id="define-bool",
        ),
        pytest.param(
            {"sources": ["main.cu"], "defines": ["X"]},
            "config.defines",
            "strings or ints",
            id="defines-list",
        ),
        pytest.param(
            {"sources": ["main.cu"], "include_dirs": ["../up"]},
            "config.include_dirs",
            "is not relative",
            id="include-escape",
        ),
        pytest.param(
            {"sources": ["main.cu"], "include_dirs": ["/usr/include"]},
            "config.include_dirs",
            "is not relative",
            id="include-abs",
        ),
        pytest.param(
            {"sources": ["main.cu"], "compile_flags": "-O3"},
            "config.compile_flags",
            "list of strings",
            id="flags-str",
        ),
    ],
)
@pytest.mark.reliability(
    "Bad input",
    "CUDA task.yml with a missing or wrongly typed `config` entry",
    "refused: names task.yml, the config key and the reason",
)
def test_invalid_cuda_config(
    tmp_path: Path, config: Any, key: str, reason: str, record_property
) -> None:
    err = load_invalid_spec(tmp_path, cu_spec(config=config), CU_FILES)
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, key)
    assert reason in err.reason


@pytest.mark.reliability(
    "Bad input",
    "CUDA task.yml naming a header file that is not there",
    "refused: key files[2].source, \"'kernel.h' does not exist\"",
)
def test_cuda_task_missing_source_file_is_refused(tmp_path: Path, record_property) -> None:
    err = load_invalid_spec(tmp_path, cu_spec(), {"main.cu": MAIN_CU})
    record_property("observed", str(err))
    assert err.key == "files[2].source"
    assert "'kernel.h' does not exist" in err.reason


# --- invalid task.yml ---------------------------------------------------------------------------


@pytest.mark.reliability(
    "Bad input",
    "task folder without task.yml",
    "refused in one line naming the folder and the missing task.yml",
)
def test_missing_task_yml(tmp_path: Path, record_property) -> None:
    folder = write_task(tmp_path / "t", None)
    err = invalid(load_task, folder)
    record_property("observed", str(err))
    assert str(err) == "invalid task: t/: no task.yml here: a task folder holds one"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("lang: [py\nfiles: x\n", "not valid YAML", id="unclosed-flow"),
        pytest.param("lang: py\n\tfiles: x\n", "not valid YAML", id="tab"),
        pytest.param("- lang\n- py\n", "must be a mapping", id="list"),
        pytest.param("just text\n", "must be a mapping", id="scalar"),
        pytest.param("", "must be a mapping", id="empty"),
    ],
)
@pytest.mark.reliability(
    "Bad input",
    "task.yml that is broken YAML, or YAML but not a mapping (list, text, empty)",
    "refused: names task.yml, 'not valid YAML' (with the position) or 'must be a mapping'",
)
def test_task_yml_not_a_yaml_mapping(
    tmp_path: Path, text: str, reason: str, record_property
) -> None:
    err = load_invalid_spec(tmp_path, text)
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, None)
    assert reason in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task.yml that is not UTF-8",
    "refused: names task.yml, 'not UTF-8 text' with the byte offset",
)
def test_task_yml_not_utf8(tmp_path: Path, record_property) -> None:
    err = load_invalid_spec(tmp_path, b"lang: py\ndescription: \xff\xfe\n")
    record_property("observed", str(err))
    assert err.file == TASK_YAML
    assert "not UTF-8" in err.reason


_BAD_SPECS = [
    # lang
    pytest.param({"lang": DELETE}, "lang", "must be 'py' or 'cu', got None", id="lang-missing"),
    pytest.param({"lang": "rust"}, "lang", "got 'rust'", id="lang-unknown"),
    pytest.param({"lang": 3}, "lang", "got 3", id="lang-int"),
    # files
    pytest.param({"files": DELETE}, "files", "non-empty list", id="files-missing"),
    pytest.param({"files": []}, "files", "non-empty list", id="files-empty"),
    pytest.param({"files": {"name": "a"}}, "files", "non-empty list", id="files-mapping"),
    pytest.param({"files": "submission.py"}, "files", "non-empty list", id="files-str"),
    pytest.param(
        {"files": [{"name": "submission.py", "source": SUBMISSION_SOURCE}, {"name": "x.py"}]},
        "files[1]",
        "must be a mapping with 'name' and 'source'",
        id="entry-no-source",
    ),
    pytest.param(
        {"files": [{"source": SUBMISSION_SOURCE}]},
        "files[0]",
        "must be a mapping with 'name' and 'source'",
        id="entry-no-name",
    ),
    pytest.param(
        {"files": [{"name": "s.py", "source": SUBMISSION_SOURCE, "mode": 1}]},
        "files[0]",
        "must be a mapping with 'name' and 'source'",
        id="entry-extra-key",
    ),
    pytest.param(
        {"files": ["submission.py"]},
        "files[0]",
        "must be a mapping with 'name' and 'source'",
        id="entry-str",
    ),
    pytest.param(
        {
            "files": [
                {"name": "submission.py", "source": SUBMISSION_SOURCE},
                {"name": "eval.py", "source": "eval.py"},
                {"name": "eval.py", "source": "reference.py"},
            ],
            "config": None,
        },
        "files[2].name",
        "'eval.py' appears twice",
        id="duplicate-name",
    ),
    pytest.param(
        {
            "files": [
                {"name": "reference.py", "source": "reference.py"},
                {"name": "eval.py", "source": "eval.py"},
            ]
        },
        "files",
        f"exactly one file must have source {SUBMISSION_SOURCE}",
        id="no-slot",
    ),
    pytest.param(
        {
            "files": [
                {"name": "a.py", "source": SUBMISSION_SOURCE},
                {"name": "b.py", "source": SUBMISSION_SOURCE},
            ],
            "config": None,
        },
        "files",
        f"exactly one file must have source {SUBMISSION_SOURCE}",
        id="two-slots",
    ),
    pytest.param(
        {
            "files": [
                {"name": "submission.py", "source": SUBMISSION_SOURCE},
                {"name": "missing.py", "source": "missing.py"},
            ],
            "config": None,
        },
        "files[1].source",
        "file 'missing.py' does not exist",
        id="missing-source",
    ),
    pytest.param(
        {
            "files": [
                {"name": "submission.py", "source": SUBMISSION_SOURCE},
                {"name": "x.py", "source": ""},
            ],
            "config": None,
        },
        "files[1].source",
        "non-empty relative path",
        id="empty-source",
    ),
    pytest.param(
        {
            "files": [
                {"name": "submission.py", "source": SUBMISSION_SOURCE},
                {"name": "x.py", "source": 5},
            ],
            "config": None,
        },
        "files[1].source",
        "non-empty relative path",
        id="int-source",
    ),
    # config
    pytest.param({"config": {"main": "nope.py"}}, "config.main", "'nope.py' is not", id="main"),
    pytest.param({"config": {"main": 5}}, "config.main", "5 is not one", id="main-int"),
    pytest.param({"config": "eval.py"}, "config", "must be a mapping", id="config-str"),
    # tests / benchmarks
    pytest.param({"tests": DELETE}, "tests", "non-empty list of cases", id="tests-missing"),
    pytest.param({"tests": []}, "tests", "non-empty list of cases", id="tests-empty"),
    pytest.param({"tests": {"size": 1}}, "tests", "non-empty list of cases", id="tests-map"),
    pytest.param({"tests": "size: 1"}, "tests", "non-empty list of cases", id="tests-str"),
    pytest.param({"benchmarks": DELETE}, "benchmarks", "non-empty list", id="benchmarks-none"),
    pytest.param({"benchmarks": []}, "benchmarks", "non-empty list", id="benchmarks-empty"),
    pytest.param({"tests": [5]}, "tests[0]", "mapping of parameters", id="case-int"),
    pytest.param({"tests": [{}]}, "tests[0]", "mapping of parameters", id="case-empty"),
    pytest.param(
        {"tests": [{"size": 1}, {"size": 1.5}]},
        "tests[1].size",
        "1.5 must be an integer, a boolean, a word",
        id="value-float",
    ),
    pytest.param(
        {"tests": [{"size": None}]}, "tests[0].size", "None must be an integer", id="value-none"
    ),
    pytest.param(
        {"tests": [{"size": {"a": 1}}]}, "tests[0].size", "must be an integer", id="value-map"
    ),
    pytest.param(
        {"tests": [{"size": [1, [2]]}]}, "tests[0].size", "must be an integer", id="value-nested"
    ),
    pytest.param(
        {"tests": [{"dtype": "16float"}]},
        "tests[0].dtype",
        "'16float' must be an integer, a boolean, a word",
        id="value-word-leading-digit",
    ),
    pytest.param(
        {"tests": [{"dtype": "two words"}]}, "tests[0].dtype", "must be an integer", id="spaces"
    ),
    pytest.param(
        {"tests": [{"flag": "False"}]}, "tests[0].flag", "'False' must", id="value-bool-word"
    ),
    pytest.param(
        {"benchmarks": [{"size": 2.0}]}, "benchmarks[0].size", "must be", id="bench-value-float"
    ),
    pytest.param(
        {"tests": [{"size-x": 1}]}, "tests[0]", "parameter name 'size-x'", id="param-dash"
    ),
    pytest.param({"tests": [{"2size": 1}]}, "tests[0]", "parameter name '2size'", id="param-digit"),
    pytest.param({"tests": [{1: 1}]}, "tests[0]", "parameter name 1", id="param-int"),
    # multi_gpu
    pytest.param(
        {"multi_gpu": True},
        "tests[0].world_size",
        "a multi_gpu task needs a positive world_size",
        id="multi-gpu-no-world-size",
    ),
    pytest.param(
        {"multi_gpu": True, "tests": [{"world_size": 0}], "benchmarks": [{"world_size": 2}]},
        "tests[0].world_size",
        "positive world_size",
        id="multi-gpu-world-size-zero",
    ),
    pytest.param(
        {"multi_gpu": True, "tests": [{"world_size": 2}], "benchmarks": [{"world_size": "x"}]},
        "benchmarks[0].world_size",
        "positive world_size",
        id="multi-gpu-world-size-word",
    ),
    pytest.param({"multi_gpu": "yes please"}, "multi_gpu", "true or false", id="multi-gpu-str"),
    pytest.param({"multi_gpu": 1}, "multi_gpu", "true or false", id="multi-gpu-int"),
    # ranking_by, description
    pytest.param({"ranking_by": "median"}, "ranking_by", "got 'median'", id="ranking-unknown"),
    pytest.param({"ranking_by": "GEOM"}, "ranking_by", "got 'GEOM'", id="ranking-case"),
    pytest.param({"ranking_by": None}, "ranking_by", "got None", id="ranking-none"),
    pytest.param({"description": 5}, "description", "must be text", id="description-int"),
    pytest.param({"description": ["a"]}, "description", "must be text", id="description-list"),
    # templates
    pytest.param({"templates": ["t.py"]}, "templates", "must map", id="templates-list"),
    pytest.param(
        {"templates": {"Python": "missing.py"}},
        "templates.Python",
        "'missing.py' does not exist",
        id="template-missing",
    ),
]


@pytest.mark.parametrize(("changes", "key", "reason"), _BAD_SPECS)
@pytest.mark.reliability(
    "Bad input",
    "task.yml key missing, of the wrong type or with a bad value",
    "refused: names task.yml, the key (e.g. `tests[1].size`) and the reason",
)
def test_invalid_task_yml(
    tmp_path: Path, changes: dict[str, Any], key: str, reason: str, record_property
) -> None:
    err = load_invalid_spec(tmp_path, py_spec(**changes))
    record_property("observed", str(err))
    assert err.file == TASK_YAML
    assert err.key == key
    assert reason in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task.yml file `name` that is unsafe: `../x.py`, `/abs.py`, `a/../../x.py`, backslash, '', "
    "'.', U+202E (right-to-left override)",
    "each refused: key files[1].name, '<name> is not a safe file name'",
)
def test_unsafe_file_names_are_refused(tmp_path: Path, record_property) -> None:
    seen: list[str] = []
    for bad in ["../x.py", "/abs.py", "a/../../x.py", "a\\b.py", "", ".", "\u202eyp.png"]:
        spec = py_spec(
            files=[
                {"name": "submission.py", "source": SUBMISSION_SOURCE},
                {"name": bad, "source": "eval.py"},
            ],
            config=None,
        )
        err = load_invalid_spec(tmp_path, spec)
        seen.append(err.reason)
        record_property("observed", "; ".join(seen))
        assert err.key == "files[1].name", bad
        assert "is not a safe file name" in err.reason, bad
        assert repr(bad) in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task.yml file `name` that is a number",
    "refused: key files[0].name, '5 is not a safe file name'",
)
def test_non_str_file_name_is_refused(tmp_path: Path, record_property) -> None:
    spec = py_spec(files=[{"name": 5, "source": SUBMISSION_SOURCE}], config=None)
    err = load_invalid_spec(tmp_path, spec)
    record_property("observed", str(err))
    assert err.key == "files[0].name"
    assert "5 is not a safe file name" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task source file that is not UTF-8",
    "refused: names reference.py, 'not UTF-8 text (byte 5)'",
)
def test_non_utf8_source_file_is_refused(tmp_path: Path, record_property) -> None:
    err = load_invalid_spec(tmp_path, py_spec(), {**PY_FILES, "reference.py": b"x = '\xff'\n"})
    record_property("observed", str(err))
    assert err.file == "reference.py"
    assert err.key is None
    assert "not UTF-8 text (byte 5)" in err.reason


@pytest.mark.parametrize("key", ["test_timeout", "benchmark_timeout", "ranked_timeout"])
@pytest.mark.parametrize(
    "value",
    [-1, 0, 0.0, "60", True, False, 3601, 3600.5, float("nan"), float("inf"), None, [60]],
    ids=repr,
)
@pytest.mark.reliability(
    "Bad input",
    "task.yml timeout outside (0, 3600] or not a number (string, bool, null, list)",
    "refused: names task.yml, the timeout key, 'must be seconds in (0, 3600]'",
)
def test_invalid_timeout(tmp_path: Path, key: str, value: Any, record_property) -> None:
    err = load_invalid_spec(tmp_path, py_spec(**{key: value}))
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, key)
    assert "must be seconds in (0, 3600]" in err.reason


@pytest.mark.parametrize(("value", "expected"), [(1, 1.0), (0.5, 0.5), (3600, 3600.0)])
def test_timeout_bounds_accepted(tmp_path: Path, value: float, expected: float) -> None:
    task = load_task(write_task(tmp_path / "t", py_spec(ranked_timeout=value)))
    assert task.ranked_timeout == expected
    assert task.timeout_for("leaderboard") == expected
    assert task.test_timeout == 180.0


@pytest.mark.reliability(
    "Bad input",
    "task.yml one byte over its size cap",
    "refused before parsing: names task.yml, '<size> bytes is over the limit of <cap>'",
)
def test_task_yml_over_size_cap(tmp_path: Path, record_property) -> None:
    text = dump(py_spec())
    size = len(text.encode())
    folder = write_task(tmp_path / "t", text)
    err = invalid(load_task, folder, limits=TaskLimits(yaml_bytes=size - 1))
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, None)
    assert f"{size} bytes is over the limit of {size - 1}" in err.reason
    # Exactly at the cap is fine.
    assert load_task(folder, limits=TaskLimits(yaml_bytes=size)).name == "t"


def test_parse_task_yaml_cap_is_checked_before_parsing() -> None:
    with pytest.raises(InvalidTaskError, match="over the limit of 10"):
        parse_task_yaml(b"lang: [unclosed", limits=TaskLimits(yaml_bytes=10))


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
lang: py
"""


@pytest.mark.reliability(
    "Bad input",
    "YAML alias bomb ('billion laughs', 9^9 strings) as task.yml",
    "refused in under 2 s: names task.yml, 'not valid YAML: aliases are not allowed'",
)
def test_yaml_alias_bomb_is_refused_quickly(tmp_path: Path, record_property) -> None:
    folder = write_task(tmp_path / "t", BILLION_LAUGHS)
    began = time.monotonic()
    err = invalid(load_task, folder)
    record_property("observed", f"{err} ({time.monotonic() - began:.3f} s)")
    assert time.monotonic() - began < 2.0
    assert (err.file, err.key) == (TASK_YAML, None)
    assert "not valid YAML" in err.reason
    assert "aliases are not allowed" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "YAML merge key (`<<: *base`) in task.yml",
    "refused: 'aliases are not allowed'",
)
def test_yaml_merge_key_alias_is_refused(record_property) -> None:
    text = b"base: &base {size: 1}\ntests:\n  - <<: *base\n    seed: 2\n"
    with pytest.raises(InvalidTaskError, match="aliases are not allowed") as info:
        parse_task_yaml(text)
    record_property("observed", str(info.value))


@pytest.mark.reliability(
    "Bad input",
    "`!!python/object/apply:os.system` tag in task.yml",
    "refused as 'not valid YAML'; nothing is constructed or run",
)
def test_yaml_python_tags_are_refused(record_property) -> None:
    with pytest.raises(InvalidTaskError, match="not valid YAML") as info:
        parse_task_yaml(b"lang: !!python/object/apply:os.system ['true']\n")
    record_property("observed", str(info.value))


# --- known bugs: failures that escape as something other than InvalidTaskError ----------------


@pytest.mark.parametrize(
    "changes",
    [{"lang": ["py"]}, {"lang": {"py": 1}}, {"ranking_by": ["last"]}],
    ids=["lang-list", "lang-map", "ranking-list"],
)
@pytest.mark.reliability(
    "Bad input",
    "task.yml `lang` or `ranking_by` given as a list or a mapping",
    "refused as an invalid task naming the key, not a TypeError",
)
def test_unhashable_enum_values_are_invalid_task(
    tmp_path: Path, changes: dict[str, Any], record_property
) -> None:
    err = load_invalid_spec(tmp_path, py_spec(**changes))
    record_property("observed", str(err))


@pytest.mark.reliability(
    "Bad input",
    "task.yml of 1000 nested `[`",
    "refused as an invalid task, not a RecursionError",
)
def test_deeply_nested_yaml_is_invalid_task(record_property) -> None:
    with pytest.raises(InvalidTaskError) as info:
        parse_task_yaml(b"[" * 1000)
    record_property("observed", str(info.value))


@pytest.mark.reliability(
    "Bad input",
    "task.yml files `submission.py` and `./submission.py` (the same file twice)",
    "refused: \"'./submission.py' appears twice\"",
)
def test_names_equal_after_normalisation_are_duplicates(tmp_path: Path, record_property) -> None:
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "./submission.py", "source": "eval.py"},
        ],
        config=None,
    )
    err = load_invalid_spec(tmp_path, spec)
    record_property("observed", str(err))
    assert "appears twice" in err.reason


# --- zips -------------------------------------------------------------------------------------


def test_zip_with_task_yml_at_root(tmp_path: Path) -> None:
    path = tmp_path / "my_task.zip"
    path.write_bytes(zip_bytes(task_entries()))
    task = load_task(path)
    assert task.name == "my_task"
    assert file_content(task, "reference.py") == REFERENCE
    assert task.main == "eval.py"
    assert task == load_task(write_task(tmp_path / "my_task", py_spec()))


def test_zip_with_task_in_one_top_level_folder(tmp_path: Path) -> None:
    entries = task_entries("vectorsum/")
    path = tmp_path / "upload.zip"
    path.write_bytes(zip_bytes(entries))
    task = load_task(path)
    assert task.name == "upload"
    assert file_content(task, "eval.py") == EVAL


def test_zip_with_directory_entries(tmp_path: Path) -> None:
    items: list[tuple[str | zipfile.ZipInfo, str | bytes]] = [("task1/", b"")]
    items += list(task_entries("task1/").items())
    task = load_task_zip_bytes(zip_bytes(items), "task1.zip")
    assert file_content(task, "reference.py") == REFERENCE


def test_zip_bytes_named_after_upload(tmp_path: Path) -> None:
    task = load_task_zip_bytes(zip_bytes(task_entries()), "uploads/vector_add.zip")
    assert task.name == "vector_add"
    assert task.tests == tuple(py_spec()["tests"])


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_zip_other_compressions(compression: int) -> None:
    task = load_task_zip_bytes(zip_bytes(task_entries(), compression=compression), "t.zip")
    assert file_content(task, "reference.py") == REFERENCE


def test_zip_sibling_of_task_folder_loads() -> None:
    """A zip holding a problem set one level deep: task1/task.yml names ../eval.py."""
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "eval.py", "source": "../eval.py"},
        ]
    )
    data = zip_bytes({"eval.py": "# shared\n", "task1/task.yml": dump(spec)})
    task = load_task_zip_bytes(data, "set.zip")
    assert file_content(task, "eval.py") == "# shared\n"


@pytest.mark.reliability(
    "Bad input",
    "task zip whose task.yml names `../../eval.py`, outside the archive",
    "refused: key files[1].source, 'leaves the archive'",
)
def test_zip_source_leaving_archive_is_refused(record_property) -> None:
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "eval.py", "source": "../../eval.py"},
        ]
    )
    err = invalid(load_task_zip_bytes, zip_bytes({"task1/task.yml": dump(spec)}), "set.zip")
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, "files[1].source")
    assert "leaves the archive" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip with task.yml two folders deep (set/task1/task.yml)",
    "refused: names the zip, 'no task.yml at the root or in one folder'",
)
def test_zip_problem_set_two_levels_deep_is_not_found(record_property) -> None:
    """The loader only looks for task.yml at depth <= 1: set/task1/task.yml is not found."""
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "eval.py", "source": "../eval.py"},
        ]
    )
    data = zip_bytes({"set/eval.py": "# shared\n", "set/task1/task.yml": dump(spec)})
    err = invalid(load_task_zip_bytes, data, "set.zip")
    record_property("observed", str(err))
    assert (err.file, err.key) == ("set.zip", None)
    assert "no task.yml at the root or in one folder" in err.reason


def test_zip_root_task_yml_wins_over_folder_one() -> None:
    entries = task_entries()
    entries["other/task.yml"] = "not: [valid"
    task = load_task_zip_bytes(zip_bytes(entries), "t.zip")
    assert task.main == "eval.py"


@pytest.mark.reliability(
    "Bad input",
    "task zip holding two tasks (a/task.yml and b/task.yml)",
    "refused: names the zip, 'several task.yml files' and both paths",
)
def test_zip_with_several_task_yml_is_refused(record_property) -> None:
    entries = {**task_entries("a/"), **task_entries("b/")}
    err = invalid(load_task_zip_bytes, zip_bytes(entries), "t.zip")
    record_property("observed", str(err))
    assert err.file == "t.zip"
    assert "several task.yml files" in err.reason
    assert "a/task.yml" in err.reason and "b/task.yml" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip without task.yml",
    "refused: names the zip, 'no task.yml at the root or in one folder'",
)
def test_zip_without_task_yml_is_refused(record_property) -> None:
    err = invalid(load_task_zip_bytes, zip_bytes({"eval.py": EVAL}), "t.zip")
    record_property("observed", str(err))
    assert "no task.yml" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip missing a file its task.yml names",
    "refused: key files[1].source, \"file 'reference.py' is not in t.zip\"",
)
def test_zip_missing_referenced_file_names_it(record_property) -> None:
    entries = task_entries()
    del entries["reference.py"]
    err = invalid(load_task_zip_bytes, zip_bytes(entries), "t.zip")
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, "files[1].source")
    assert "file 'reference.py' is not in t.zip" in err.reason


@pytest.mark.parametrize("name", ["../evil.py", "a/../../evil.py", "..\\evil.py"])
@pytest.mark.reliability(
    "Bad input",
    "task zip entry with a path traversal (`../evil.py`)",
    "refused before anything is read: names the entry, 'escapes the archive root'",
)
def test_zip_entry_with_dotdot_is_refused(name: str, record_property) -> None:
    data = zip_bytes({**task_entries(), name: "x"})
    err = invalid(load_task_zip_bytes, data, "t.zip")
    record_property("observed", str(err))
    assert (err.file, err.key) == ("t.zip", name)
    assert "escapes the archive root" in err.reason


@pytest.mark.parametrize("name", ["/abs.py", "\\abs.py", "C:/abs.py"])
@pytest.mark.reliability(
    "Bad input",
    "task zip entry with an absolute path (`/abs.py`, `C:/abs.py`)",
    "refused: names the entry, 'absolute paths are not allowed in a task zip'",
)
def test_zip_absolute_entry_is_refused(name: str, record_property) -> None:
    data = zip_bytes({**task_entries(), name: "x"})
    assert name in zipfile.ZipFile(io.BytesIO(data)).namelist()
    err = invalid(load_task_zip_bytes, data, "t.zip")
    record_property("observed", str(err))
    assert (err.file, err.key) == ("t.zip", name)
    assert "absolute paths are not allowed" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip with a symlink entry pointing at /etc/passwd",
    "refused: names the entry, 'symbolic links are not allowed in a task zip'",
)
def test_zip_symlink_entry_is_refused(record_property) -> None:
    link = zipfile.ZipInfo("link.py")
    link.create_system = 3
    link.external_attr = 0o120777 << 16
    data = zip_bytes([*task_entries().items(), (link, "/etc/passwd")])
    err = invalid(load_task_zip_bytes, data, "t.zip")
    record_property("observed", str(err))
    assert (err.file, err.key) == ("t.zip", "link.py")
    assert "symbolic links are not allowed" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip with more entries than allowed (6, limit 5)",
    "refused before reading: '6 entries is over the limit of 5'",
)
def test_zip_too_many_entries_is_refused(record_property) -> None:
    entries = {**task_entries(), **{f"extra{i}.txt": "x" for i in range(3)}}
    assert len(entries) == 6
    data = zip_bytes(entries)
    err = invalid(load_task_zip_bytes, data, "t.zip", limits=TaskLimits(zip_entries=5))
    record_property("observed", str(err))
    assert "6 entries is over the limit of 5" in err.reason
    assert load_task_zip_bytes(data, "t.zip", limits=TaskLimits(zip_entries=6)).name == "t"


@pytest.mark.reliability(
    "Bad input",
    "task zip whose declared uncompressed size is over the total cap",
    "refused before reading: 'uncompressed size <n> bytes is over the limit of 4000'",
)
def test_zip_declared_total_size_over_cap_is_refused(record_property) -> None:
    entries = {**task_entries(), "data.bin": b"\0" * 5000}
    data = zip_bytes(entries)
    declared = sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(data)).infolist())
    err = invalid(load_task_zip_bytes, data, "t.zip", limits=TaskLimits(total_bytes=4000))
    record_property("observed", str(err))
    assert err.file == "t.zip"
    assert f"uncompressed size {declared} bytes is over the limit of 4000" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip whose task.yml is over its size cap",
    "refused: names task.yml, 'over the limit of 50'",
)
def test_zip_task_yml_over_cap_is_refused(record_property) -> None:
    data = zip_bytes(task_entries())
    err = invalid(load_task_zip_bytes, data, "t.zip", limits=TaskLimits(yaml_bytes=50))
    record_property("observed", str(err))
    assert (err.file, err.key) == (TASK_YAML, None)
    assert "over the limit of 50" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip member over the per-file cap",
    "refused: names the entry, 'uncompresses to more than the size limit (zip bomb?)'",
)
def test_zip_file_over_file_cap_is_refused(record_property) -> None:
    data = zip_bytes({**task_entries(), "reference.py": "x" * 3000})
    err = invalid(load_task_zip_bytes, data, "t.zip", limits=TaskLimits(file_bytes=2000))
    record_property("observed", str(err))
    assert (err.file, err.key) == ("t.zip", "reference.py")
    assert "uncompresses to more than the size limit (zip bomb?)" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip member that is not UTF-8",
    "refused: names reference.py, 'not UTF-8 text'",
)
def test_zip_non_utf8_file_is_refused(record_property) -> None:
    data = zip_bytes({**task_entries(), "reference.py": b"\xc3\x28"})
    err = invalid(load_task_zip_bytes, data, "t.zip")
    record_property("observed", str(err))
    assert err.file == "reference.py"
    assert "not UTF-8" in err.reason


BOMB_BYTES = 50 * 1000 * 1000


@pytest.fixture(scope="module")
def zip_bomb() -> bytes:
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "data.bin", "source": "data.bin"},
        ],
        config=None,
    )
    data = zip_bytes({"task.yml": dump(spec), "data.bin": bytes(BOMB_BYTES)})
    assert len(data) < 200_000  # ~50 KB compressed
    return data


@pytest.mark.reliability(
    "Bad input",
    "zip bomb: ~50 KB zip inflating to 50 MB",
    "refused by its declared size, before inflating",
)
def test_zip_bomb_refused_by_declared_size(zip_bomb: bytes, record_property) -> None:
    err = invalid(load_task_zip_bytes, zip_bomb, "bomb.zip", limits=TaskLimits(file_bytes=MiB))
    record_property("observed", str(err))
    assert "uncompressed size" in err.reason and "over the limit" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "zip bomb under a generous total cap (only the 1 MiB per-file cap applies)",
    "refused in under 2 s, reading no more than the file cap: 'size limit (zip bomb?)'",
)
def test_zip_bomb_refused_by_bounded_read(
    zip_bomb: bytes, monkeypatch: pytest.MonkeyPatch, record_property
) -> None:
    """Even with a generous total cap, the entry is read no further than the file cap."""
    requested: list[int] = []
    original = zipfile.ZipExtFile.read

    def spy(self: zipfile.ZipExtFile, n: int = -1) -> bytes:
        requested.append(n)
        return original(self, n)

    monkeypatch.setattr(zipfile.ZipExtFile, "read", spy)
    limits = TaskLimits(file_bytes=MiB, total_bytes=100 * 1000 * 1000)
    began = time.monotonic()
    err = invalid(load_task_zip_bytes, zip_bomb, "bomb.zip", limits=limits)
    elapsed = time.monotonic() - began
    largest = max(requested, default=0)
    record_property("observed", f"{err} ({elapsed:.3f} s, largest read {largest} bytes)")
    assert elapsed < 2.0
    assert (err.file, err.key) == ("bomb.zip", "data.bin")
    assert "size limit" in err.reason and "zip bomb" in err.reason
    assert requested, "the member was never read"
    assert all(0 <= n <= MiB + 1 for n in requested), requested


def _lie_about_size(data: bytes, member: str, declared: int) -> bytes:
    """Rewrites `member`'s uncompressed size in both its local and central headers."""
    out = bytearray(data)
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(member)
    local = info.header_offset
    assert out[local : local + 4] == b"PK\x03\x04"
    struct.pack_into("<I", out, local + 22, declared)
    pos = 0
    while True:
        pos = out.index(b"PK\x01\x02", pos)
        name_len = struct.unpack_from("<H", out, pos + 28)[0]
        if out[pos + 46 : pos + 46 + name_len] == member.encode():
            break
        pos += 4
    struct.pack_into("<I", out, pos + 24, declared)
    return bytes(out)


@pytest.mark.reliability(
    "Bad input",
    "zip whose headers claim 100 bytes for a 3 MiB member",
    "refused in under 2 s: names the entry, 'cannot be read'",
)
def test_zip_header_lying_about_size_is_refused(record_property) -> None:
    spec = py_spec(
        files=[
            {"name": "submission.py", "source": SUBMISSION_SOURCE},
            {"name": "data.bin", "source": "data.bin"},
        ],
        config=None,
    )
    honest = zip_bytes({"task.yml": dump(spec), "data.bin": b"a" * (3 * MiB)})
    data = _lie_about_size(honest, "data.bin", 100)
    assert zipfile.ZipFile(io.BytesIO(data)).getinfo("data.bin").file_size == 100
    began = time.monotonic()
    err = invalid(load_task_zip_bytes, data, "liar.zip", limits=TaskLimits(file_bytes=MiB))
    record_property("observed", str(err))
    assert time.monotonic() - began < 2.0
    assert (err.file, err.key) == ("liar.zip", "data.bin")
    assert "cannot be read" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task.zip that is really a text file",
    "refused: names task.zip, 'not a folder and not a zip archive'",
)
def test_not_a_zip_file_is_refused(tmp_path: Path, record_property) -> None:
    path = tmp_path / "task.zip"
    path.write_text("lang: py\n")
    err = invalid(load_task, path)
    record_property("observed", str(err))
    assert (err.file, err.key) == ("task.zip", None)
    assert "not a folder and not a zip archive" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "uploaded task bytes that are not a zip",
    "refused: names up.zip, 'not a valid zip archive'",
)
def test_not_a_zip_bytes_is_refused(record_property) -> None:
    err = invalid(load_task_zip_bytes, b"definitely not a zip", "up.zip")
    record_property("observed", str(err))
    assert (err.file, err.key) == ("up.zip", None)
    assert "not a valid zip archive" in err.reason


@pytest.mark.reliability(
    "Bad input",
    "task zip cut in half",
    "refused with our own error, not a zipfile exception",
)
def test_truncated_zip_bytes_are_refused(record_property) -> None:
    data = zip_bytes(task_entries())
    with pytest.raises(ClusterManagerError) as info:
        load_task_zip_bytes(data[: len(data) // 2], "half.zip")
    record_property("observed", str(info.value))


def _corrupt_deflate_member(data: bytes, member: str) -> bytes:
    out = bytearray(data)
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(member)
    local = info.header_offset
    name_len, extra_len = struct.unpack_from("<HH", out, local + 26)
    # First deflate byte: BFINAL=1, BTYPE=11 (reserved) -> an invalid stream.
    out[local + 30 + name_len + extra_len] = 0x07
    return bytes(out)


@pytest.mark.reliability(
    "Bad input",
    "task zip member with a corrupt deflate stream",
    "refused as an invalid task, not a zlib.error",
)
def test_zip_with_corrupt_deflate_data_is_invalid_task(record_property) -> None:
    data = _corrupt_deflate_member(zip_bytes(task_entries()), "reference.py")
    with pytest.raises(InvalidTaskError) as info:
        load_task_zip_bytes(data, "t.zip")
    record_property("observed", str(info.value))


@pytest.mark.reliability(
    "Bad input",
    "zip file whose end record announces an entry that is not there",
    "refused as an invalid task by both the upload and the path loader",
)
def test_zip_file_with_broken_central_directory_is_invalid_task(
    tmp_path: Path, record_property
) -> None:
    # An end-of-central-directory record announcing one entry, and no real directory.
    eocd = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 1, 1, 46, 0, 0)
    path = tmp_path / "broken.zip"
    path.write_bytes(bytes(46) + eocd)
    assert zipfile.is_zipfile(path)
    # The in-memory loader handles it ...
    with pytest.raises(InvalidTaskError, match="not a valid zip archive") as info:
        load_task_zip_bytes(path.read_bytes(), "broken.zip")
    record_property("observed", str(info.value))
    # ... the path loader does not.
    with pytest.raises(InvalidTaskError):
        load_task(path)


# --- arbitrary input --------------------------------------------------------------------------


def _loads_or_refuses(data: bytes) -> None:
    """The loader either returns a task or raises InvalidTaskError; nothing else escapes."""
    try:
        task = load_task_zip_bytes(data, "t.zip")
    except InvalidTaskError as err:
        assert str(err).startswith("invalid task: ")
    else:
        assert isinstance(task, Task)


_YAML_CHARS = list("abcpyu:-[]{}&*!|>'\"#\n \t,?%@`0123456789.\\<~")


@pytest.mark.reliability(
    "Bad input",
    "random text and random bytes as task.yml (property-based, hypothesis)",
    "the loader only ever returns a task or raises InvalidTaskError",
)
@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(alphabet=st.sampled_from(_YAML_CHARS), max_size=200), st.binary()))
def test_random_task_yml_never_crashes_the_loader(text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    _loads_or_refuses(zip_bytes({TASK_YAML: data, **PY_FILES}))


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["py", "cu", "eval.py", "../x.py", "/abs.py", SUBMISSION_SOURCE, "geom"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(st.text(max_size=6), st.sampled_from(["name", "source", "size", "main"])),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=10,
)
_KEYS = [*py_spec(), "templates", "description", "ranking_by", "multi_gpu", "test_timeout"]


@pytest.mark.reliability(
    "Bad input",
    "task.yml keys set to random values of any type (property-based, hypothesis)",
    "the loader only ever returns a task or raises InvalidTaskError",
)
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=4))
def test_random_task_yml_values_never_crash_the_loader(changes: dict[str, Any]) -> None:
    text = yaml.safe_dump({**py_spec(), **changes})
    _loads_or_refuses(zip_bytes({TASK_YAML: text, **PY_FILES}))


_NAME_PARTS = st.sampled_from(
    [TASK_YAML, "eval.py", "reference.py", "a", "..", ".", "", "C:", "\\x", "\u00fc"]
)
_ENTRY_NAMES = st.lists(_NAME_PARTS, min_size=1, max_size=3).map("/".join).filter(bool)


@pytest.mark.reliability(
    "Bad input",
    "random zips (hypothesis): names with `..`, `C:`, backslashes, non-ASCII; random contents",
    "the loader only ever returns a task or raises InvalidTaskError",
)
@settings(max_examples=200, deadline=None)
@given(
    st.booleans(),
    st.dictionaries(_ENTRY_NAMES, st.one_of(st.binary(max_size=64), st.text(max_size=64))),
)
def test_random_zips_never_crash_the_loader(
    with_task: bool, entries: dict[str, str | bytes]
) -> None:
    base: dict[str, str | bytes] = dict(task_entries()) if with_task else {}
    _loads_or_refuses(zip_bytes({**base, **entries}))


def _central_header(data: bytes, member: str) -> int:
    """Where `member`'s entry starts in the zip's central directory."""
    pos = 0
    while True:
        pos = data.index(b"PK\x01\x02", pos)
        name_len = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46 : pos + 46 + name_len] == member.encode():
            return pos
        pos += 4


def _needs_zip_version_6_4(data: bytes) -> bytes:
    out = bytearray(data)
    out[_central_header(data, TASK_YAML) + 6] = 64  # "version needed to extract": 6.4
    return bytes(out)


def _central_directory_offset_too_large(data: bytes) -> bytes:
    out = bytearray(data)
    end = data.rindex(b"PK\x05\x06")
    offset = struct.unpack_from("<I", data, end + 16)[0]
    struct.pack_into("<I", out, end + 16, offset + 1000)  # members now start at -1000
    return bytes(out)


def _local_name_not_utf8(data: bytes) -> bytes:
    out = bytearray(data)
    local = zipfile.ZipFile(io.BytesIO(data)).getinfo(TASK_YAML).header_offset
    out[local + 7] |= 0x08  # flag bit 11: the name is UTF-8 ...
    out[local + 30] = 0xFF  # ... and it is not
    return bytes(out)


def _name_starting_with_nul(data: bytes) -> bytes:
    out = bytearray(data)
    out[_central_header(data, "eval.py") + 46] = 0  # zipfile cuts the name at NUL: ""
    return bytes(out)


@pytest.mark.reliability(
    "Bad input",
    "task zip with one corrupted header field (found by fuzzing random byte flips)",
    "refused as an invalid task naming the zip, like any other broken archive",
)
@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(
            _needs_zip_version_6_4,
            id="extract-version",
        ),
        pytest.param(
            _central_directory_offset_too_large,
            id="negative-offset",
        ),
        pytest.param(
            _local_name_not_utf8,
            id="name-not-utf8",
        ),
        pytest.param(
            _name_starting_with_nul,
            id="empty-name",
        ),
    ],
)
def test_zip_with_corrupt_header_is_invalid_task(corrupt: Any, record_property) -> None:
    data = corrupt(zip_bytes(task_entries()))
    with pytest.raises(InvalidTaskError) as info:
        load_task_zip_bytes(data, "t.zip")
    record_property("observed", str(info.value))
    assert info.value.file == "t.zip"


# --- JSON round trip --------------------------------------------------------------------------


def test_python_task_json_round_trip(tmp_path: Path) -> None:
    spec = py_spec(
        templates={"Python": "template.py"},
        description="desc",
        ranking_by="mean",
        multi_gpu=True,
        tests=[{"world_size": 2, "dtype": "half"}],
        benchmarks=[{"world_size": 4, "seed": -1}],
        benchmark_timeout=30,
    )
    task = load_task(write_task(tmp_path / "t", spec, {**PY_FILES, "template.py": TEMPLATE}))
    data = json.loads(json.dumps(task.to_json()))
    assert data["lang"] == "py" and data["ranking_by"] == "mean"
    assert Task.from_json(data) == task


def test_cuda_task_json_round_trip(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path / "t", cu_spec(), CU_FILES))
    data = json.loads(json.dumps(task.to_json()))
    assert data["cuda"]["defines"] == {"N": "4", "BLOCK": "256"}
    again = Task.from_json(data)
    assert again == task
    assert isinstance(again.cuda, CudaConfig)
    assert again.cuda.sources == ("main.cu", "submission.cu")
    assert again.files == task.files and isinstance(again.files, tuple)
