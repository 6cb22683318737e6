"""The worker's side of the reply: outputs sent compact, failures as text."""

from __future__ import annotations

import torch

from cluster_manager.harness import worker


def test_a_view_of_a_larger_storage_is_sent_at_its_own_size():
    big = torch.zeros(1_000_000)
    view = big[:10]
    sent = worker.compact({"out": [view, (big[:5], 3)]})
    assert sent["out"][0].untyped_storage().nbytes() == 10 * 4
    assert sent["out"][1][0].untyped_storage().nbytes() == 5 * 4
    assert sent["out"][1][1] == 3
    assert len(worker.encode({"ok": True, "output": sent})) < 10_000


def test_a_tensor_that_owns_its_storage_is_not_copied():
    own = torch.arange(10)
    assert worker.compact(own) is own


def test_a_submission_exception_is_reported_as_text_with_its_verdict():
    try:
        raise MemoryError("cannot allocate memory")
    except MemoryError as exc:
        reply = worker.failure(exc)
    assert reply["ok"] is False and reply["verdict"] == "memory_limit"
    assert "MemoryError: cannot allocate memory" in reply["error"]
