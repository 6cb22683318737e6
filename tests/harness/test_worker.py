"""The worker's side of the reply: outputs sent compact, failures as text, the timed call's
replies in order; and the trusted echo beside it."""

from __future__ import annotations

import multiprocessing
import sys

import torch

from cluster_manager.harness import cases, tensors, worker, workers


def test_a_view_of_a_larger_storage_is_sent_at_its_own_size():
    big = torch.zeros(1_000_000)
    view = big[:10]
    sent = tensors.compact({"out": [view, (big[:5], 3)]})
    assert sent["out"][0].untyped_storage().nbytes() == 10 * 4
    assert sent["out"][1][0].untyped_storage().nbytes() == 5 * 4
    assert sent["out"][1][1] == 3
    assert len(worker.encode({"ok": True, "output": sent})) < 10_000


def test_a_tensor_that_owns_its_storage_is_not_copied():
    own = torch.arange(10)
    assert tensors.compact(own) is own


def test_a_submission_exception_is_reported_as_text_with_its_verdict():
    try:
        raise MemoryError("cannot allocate memory")
    except MemoryError as exc:
        reply = worker.failure(exc)
    assert reply["ok"] is False and reply["verdict"] == "memory_limit"
    assert "MemoryError: cannot allocate memory" in reply["error"]


def test_a_timed_call_sends_its_duration_first_and_its_output_only_when_ranked(
    tmp_path, monkeypatch
):
    (tmp_path / "reference.py").write_text("def generate_input(size, seed):\n    return size\n")
    (tmp_path / "submission.py").write_text("def custom_kernel(data):\n    return data * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in ("reference", "submission"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    process = worker.Worker()
    process.open({"size": 21, "seed": 1}, 0, None, 0, False)
    process.warm_up()
    duration, output = process.run(with_output=True)
    assert isinstance(duration, float) and duration > 0
    assert output == {"ok": True, "output": 42}
    assert [type(reply) for reply in process.run()] == [float]


def test_the_echo_holds_bytes_and_sends_them_when_asked():
    echo = workers.Echo(multiprocessing.get_context("spawn"))
    try:
        assert echo.round_trip() > 0
        output = torch.arange(1000)
        echo.hold(worker.encode({"ok": True, "output": output}))
        assert torch.equal(workers._parse(echo.give())["output"], output)
        took, size = cases.transfer_estimate(echo, [output, output])
        assert took > 0
        assert size == 2 * len(worker.encode({"ok": True, "output": output}))
    finally:
        echo.stop()
