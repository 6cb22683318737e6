"""validate_submission: size, extension, encoding, entry point and `#!POPCORN` headers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_manager.core.errors import ClusterManagerError, InvalidSubmissionError
from cluster_manager.core.models import Language
from cluster_manager.core.submission import (
    MAX_SUBMISSION_BYTES,
    Submission,
    format_size,
    in_own_names,
    parse_headers,
    validate_submission,
)

PY = Language.PYTHON
CU = Language.CUDA
DEF_KERNEL = b"import torch\n\ndef custom_kernel(data):\n    return data\n"
CU_KERNEL = b"__global__ void k(float* x) {}\nvoid custom_kernel(float* x) { k<<<1, 1>>>(x); }\n"


def refused(name: str, data: bytes, lang: Language = PY, **kwargs: int) -> str:
    with pytest.raises(InvalidSubmissionError) as info:
        validate_submission(name, data, lang, **kwargs)
    return str(info.value)


# --- valid ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        DEF_KERNEL,
        b"async def custom_kernel(data):\n    return data\n",
        b"def _impl(data):\n    return data\n\ncustom_kernel = _impl\n",
        b"from typing import Callable\ncustom_kernel: Callable = lambda data: data\n",
        b"a = custom_kernel = print\n",
        b"from mylib.kernels import fast_sum as custom_kernel\n",
        b"from mylib import custom_kernel\n",
        b"import custom_kernel\n",
        b"# -*- coding: utf-8 -*-\n'''doc'''\ndef custom_kernel(d): return d\n",
    ],
    ids=[
        "def",
        "async-def",
        "assign",
        "ann-assign",
        "chained-assign",
        "import-as",
        "from-import",
        "import",
        "docstring",
    ],
)
def test_valid_python_entry_points(code: bytes) -> None:
    sub = validate_submission("submission.py", code, PY)
    assert sub == Submission("submission.py", code.decode(), None, None)


def test_valid_cuda_submission() -> None:
    sub = validate_submission("kernel.cu", CU_KERNEL, CU)
    assert sub.file_name == "kernel.cu"
    assert sub.code == CU_KERNEL.decode()


@pytest.mark.parametrize("name", ["k.cu", "k.cuh", "k.cpp", "k.cc", "K.CU"])
def test_cuda_extensions(name: str) -> None:
    assert validate_submission(name, CU_KERNEL, CU).file_name == name


def test_file_name_is_reduced_to_its_base_name() -> None:
    assert validate_submission("some/dir/sub.py", DEF_KERNEL, PY).file_name == "sub.py"
    assert validate_submission("C:\\Users\\me\\sub.py", DEF_KERNEL, PY).file_name == "sub.py"


def test_upper_case_python_extension() -> None:
    assert validate_submission("SUB.PY", DEF_KERNEL, PY).file_name == "SUB.PY"


def test_exactly_max_bytes_is_fine() -> None:
    code = DEF_KERNEL + b"#" * 10
    assert validate_submission("s.py", code, PY, max_bytes=len(code)).code == code.decode()


def test_default_max_bytes() -> None:
    assert MAX_SUBMISSION_BYTES == 256 * 1024
    big = DEF_KERNEL + b"#" * (MAX_SUBMISSION_BYTES - len(DEF_KERNEL))
    assert len(validate_submission("s.py", big, PY).code) == MAX_SUBMISSION_BYTES
    assert "over the 256 KiB limit" in refused("s.py", big + b"#")


# --- refused ----------------------------------------------------------------------------------


@pytest.mark.reliability(
    "Bad input",
    "empty submission file",
    "refused: 's.py: the file is empty'",
)
def test_empty_is_refused(record_property) -> None:
    msg = refused("s.py", b"")
    record_property("observed", msg)
    assert msg == "s.py: the file is empty"


@pytest.mark.reliability(
    "Bad input",
    "submission over the size limit",
    "refused: names the file, 'NAME is <size>, over the <max> limit for a submission' in "
    "bytes, KiB or MiB",
)
def test_too_large_is_refused(record_property) -> None:
    code = DEF_KERNEL + b"#" * 100
    msg = refused("s.py", code, max_bytes=50)
    record_property("observed", msg)
    assert msg == f"s.py is {len(code)} bytes, over the 50 bytes limit for a submission"
    # A byte over reads as over, not as the limit itself rounded ("256.0 KiB").
    over = refused("s.py", DEF_KERNEL + b"#" * ((256 << 10) + 1 - len(DEF_KERNEL)))
    assert over == "s.py is 256 KiB and 1 byte, over the 256 KiB limit for a submission"


@pytest.mark.parametrize("name", ["s.txt", "s.cu", "s", "s.py.txt", "s.pyc", ".py"])
@pytest.mark.reliability(
    "Bad input",
    "Python task given a file with the wrong extension",
    "refused: '<name>: this task takes .py files (py task)'",
)
def test_wrong_extension_for_python(name: str, record_property) -> None:
    msg = refused(name, DEF_KERNEL, PY)
    record_property("observed", msg)
    assert msg == f"{name}: this task takes .py files (py task)"


@pytest.mark.parametrize("name", ["k.py", "k.c", "k.h", "k"])
@pytest.mark.reliability(
    "Bad input",
    "CUDA task given a file with the wrong extension",
    "refused: '<name>: this task takes .cu or .cuh or .cpp or .cc files (cu task)'",
)
def test_wrong_extension_for_cuda(name: str, record_property) -> None:
    msg = refused(name, CU_KERNEL, CU)
    record_property("observed", msg)
    assert msg == f"{name}: this task takes .cu or .cuh or .cpp or .cc files (cu task)"


@pytest.mark.reliability(
    "Bad input",
    "binary submission (a NUL byte in .py and in .cu)",
    "refused: 'binary file (contains NUL bytes)'",
)
def test_nul_bytes_are_refused(record_property) -> None:
    msg = refused("s.py", DEF_KERNEL + b"\x00")
    record_property("observed", msg)
    assert "binary file (contains NUL bytes)" in msg
    assert "NUL bytes" in refused("k.cu", CU_KERNEL + b"\x00", CU)


@pytest.mark.reliability(
    "Bad input",
    "a submission named with U+202E (right-to-left override) to read as another file",
    "refused: the name holds characters that do not show as written, named by code point",
)
def test_names_that_do_not_read_as_written_are_refused(record_property) -> None:
    msg = refused("\u202eyp.png", DEF_KERNEL)
    record_property("observed", msg)
    assert msg == (
        "'\\u202eyp.png': the file name holds characters that do not show as written (U+202E)"
    )
    assert "U+200B" in refused("s\u200b.py", DEF_KERNEL)


@pytest.mark.reliability(
    "Bad input",
    "submission that is not UTF-8",
    "refused: 's.py: not UTF-8 text (byte 34)'",
)
def test_invalid_utf8_is_refused(record_property) -> None:
    msg = refused("s.py", b"def custom_kernel(d):\n    return '\xff'\n")
    record_property("observed", msg)
    assert msg == "s.py: not UTF-8 text (byte 34)"


@pytest.mark.reliability(
    "Bad input",
    "Python submission with a syntax error",
    "refused before running: 's.py: line 3: invalid Python syntax'",
)
def test_syntax_error_names_the_line(record_property) -> None:
    msg = refused("s.py", b"import torch\n\ndef custom_kernel(data)\n    return data\n")
    record_property("observed", msg)
    assert msg.startswith("s.py: line 3: invalid Python syntax")


@pytest.mark.reliability(
    "Bad input",
    "Python submission with an indentation error",
    "refused: names line 2, 'invalid Python syntax'",
)
def test_indentation_error_names_the_line(record_property) -> None:
    msg = refused("s.py", b"def custom_kernel(d):\nreturn d\n")
    record_property("observed", msg)
    assert "line 2" in msg and "invalid Python syntax" in msg


@pytest.mark.parametrize(
    "code",
    [
        b"def kernel(data):\n    return data\n",
        b"class custom_kernel:\n    pass\n",
        b"if True:\n    def custom_kernel(d):\n        return d\n",
        b"def outer():\n    def custom_kernel(d):\n        return d\n",
        b"x = 'def custom_kernel(data)'\n",
        b"# def custom_kernel(data):\n",
        b"custom_kernel.attr = 1\n",
        b"from x import custom_kernel as other\n",
    ],
    ids=[
        "other-name",
        "class",
        "nested-if",
        "nested-def",
        "in-string",
        "in-comment",
        "attribute",
        "import-renamed-away",
    ],
)
@pytest.mark.reliability(
    "Bad input",
    "Python submission without a top-level custom_kernel (other name, class, nested, in a string)",
    "refused: 's.py: no top-level `def custom_kernel(data)` found'",
)
def test_no_python_entry_point(code: bytes, record_property) -> None:
    msg = refused("s.py", code)
    record_property("observed", msg)
    assert msg == "s.py: no top-level `def custom_kernel(data)` found"


@pytest.mark.parametrize(
    "code",
    [b"__global__ void kernel(float* x) {}\n", b"int custom_kernel_count = 3;\n"],
    ids=["other-function", "only-a-variable"],
)
@pytest.mark.reliability(
    "Bad input",
    "CUDA submission without a custom_kernel function",
    "refused: 'k.cu: no `custom_kernel(...)` definition found'",
)
def test_cuda_without_custom_kernel(code: bytes, record_property) -> None:
    msg = refused("k.cu", code, CU)
    record_property("observed", msg)
    assert msg == "k.cu: no `custom_kernel(...)` definition found"


@pytest.mark.reliability(
    "Bad input",
    "submission with several problems at once (empty .txt, oversized .txt, binary .txt)",
    "the cheapest check speaks first: empty, then size, then extension",
)
def test_checks_in_order() -> None:
    # Empty before extension, size before extension, extension before content.
    assert "empty" in refused("s.txt", b"")
    assert "over the 1 byte limit" in refused("s.txt", b"xx", max_bytes=1)
    assert "takes .py" in refused("s.txt", b"\x00\xff")


# --- headers ----------------------------------------------------------------------------------


def test_popcorn_headers_in_python() -> None:
    code = b"#!POPCORN leaderboard vectorsum\n#!POPCORN gpu H100\n" + DEF_KERNEL
    sub = validate_submission("s.py", code, PY)
    assert sub.leaderboard == "vectorsum"
    assert sub.gpu == "H100"


def test_popcorn_headers_in_cuda() -> None:
    code = b"//!POPCORN leaderboard vectoradd_cu\n  //!POPCORN   gpu   A100  \n" + CU_KERNEL
    sub = validate_submission("k.cu", code, CU)
    assert (sub.leaderboard, sub.gpu) == ("vectoradd_cu", "A100")


def test_headers_are_optional() -> None:
    sub = validate_submission("s.py", DEF_KERNEL, PY)
    assert sub.leaderboard is None and sub.gpu is None


def test_header_anywhere_first_wins_and_key_case_insensitive() -> None:
    code = (
        DEF_KERNEL
        + b"#!POPCORN GPU T4\n#!POPCORN gpu H100\n#!POPCORN Leaderboard first\n"
        + b"#!POPCORN leaderboard second\n"
    )
    sub = validate_submission("s.py", code, PY)
    assert (sub.leaderboard, sub.gpu) == ("first", "T4")


@pytest.mark.reliability(
    "Bad input",
    "malformed `#!POPCORN` header lines (two values, no value, wrong case, not at line start)",
    "ignored; only well-formed `#!POPCORN key value` lines count",
)
def test_parse_headers_ignores_malformed_lines(record_property) -> None:
    code = "\n".join(
        [
            "#!POPCORN leaderboard two words",
            "#! POPCORN gpu H100",
            "#!POPCORNgpu H100",
            "#!popcorn gpu H100",
            "x = 1  #!POPCORN gpu H100",
            "#!POPCORN gpu",
            "#!POPCORN extra value",
        ]
    )
    headers = parse_headers(code)
    record_property("observed", f"headers read: {headers}")
    assert headers == {"extra": "value"}


# --- arbitrary input --------------------------------------------------------------------------


@pytest.mark.reliability(
    "Bad input",
    "random bytes as a submission, under any file name (property-based, hypothesis)",
    "accepted as its UTF-8 text or refused with InvalidSubmissionError; nothing else escapes",
)
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(["s.py", "k.cu", "x.txt", ""]))
def test_arbitrary_bytes_never_raise_anything_else(data: bytes, name: str) -> None:
    for lang in Language:
        try:
            sub = validate_submission(name, data, lang)
        except InvalidSubmissionError as exc:
            assert isinstance(exc, ClusterManagerError)
            assert str(exc)
        else:
            assert sub.code == data.decode("utf-8")


@pytest.mark.reliability(
    "Bad input",
    "random text as a .py and as a .cu submission (property-based, hypothesis)",
    "accepted only with a custom_kernel, else refused with a message naming the file",
)
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises_anything_else(text: str) -> None:
    data = text.encode("utf-8")
    for name, lang in [("s.py", PY), ("k.cu", CU)]:
        try:
            sub = validate_submission(name, data, lang)
        except InvalidSubmissionError as exc:
            assert str(exc).startswith(f"{name}: ")
        else:
            assert sub.code == text
            assert "custom_kernel" in text


@pytest.mark.parametrize(
    "code",
    [
        b"(" * 300 + b"1" + b")" * 300,
        b"x = " + b"[" * 1000 + b"]" * 1000 + b"\n",
        b"def custom_kernel(d):\n    return " + b"-" * 100_000 + b"1\n",
    ],
    ids=["parens", "brackets", "unary"],
)
@pytest.mark.reliability(
    "Bad input",
    "Python that crashes naive parsers: 300 nested parens, 1000 nested brackets, 100k unary minus",
    "refused with a message naming the file, not a RecursionError or MemoryError",
)
def test_pathological_python_is_refused_not_crashed(code: bytes, record_property) -> None:
    with pytest.raises(InvalidSubmissionError, match=r"^s\.py: ") as info:
        validate_submission("s.py", code, PY)
    record_property("observed", str(info.value))


@pytest.mark.parametrize(
    ("size", "text"),
    [(1, "1 byte"), (1023, "1023 bytes"), (256 << 10, "256 KiB"), (300 * 1024 + 512, "300.5 KiB"),
     (3 << 20, "3 MiB"), ((1 << 20) + (1 << 19), "1.5 MiB")],
)  # fmt: skip
def test_sizes_read_as_people_write_them(size: int, text: str) -> None:
    assert format_size(size) == text


def test_a_report_names_the_users_own_file() -> None:
    said = 'ValueError: boom (submission.py, line 4)\n  File "/run/submission.py", line 4'
    assert in_own_names(said, "crash.py") == (
        'ValueError: boom (crash.py, line 4)\n  File "/run/crash.py", line 4'
    )
    assert in_own_names("my_submission.py; submission.pyc", "crash.py") == (
        "my_submission.py; submission.pyc"
    )  # other names that merely contain it stay
    assert in_own_names("kernel.cu: error", "mine.cu", slot="kernel.cu") == "mine.cu: error"
