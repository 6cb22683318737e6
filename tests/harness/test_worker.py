"""The worker's side of the reply: inputs taken as the harness sends them, outputs sent
compact, failures as text, the timed call's replies in order; and the stand-in beside it."""

from __future__ import annotations

import multiprocessing
import pickle
import sys
import threading
from pathlib import Path

import pytest
import torch

from cluster_manager.harness import case_run, tensors, wire, worker, workers
from cluster_manager.harness.zygote import Zygote


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


def test_a_timed_call_sends_its_duration_with_its_output_in_one_reply(tmp_path, monkeypatch):
    (tmp_path / "submission.py").write_text("def custom_kernel(data):\n    return data * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "submission", raising=False)
    process = worker.Worker()
    process.open(wire.encode(21), 0, None, 0)
    process.warm_up()
    timed = process.run(with_output=True)
    assert isinstance(timed, worker.Timed) and timed.duration > 0
    assert timed.reply == {"ok": True, "output": 42}  # a worker says nothing of its waits
    assert isinstance(process.run(), float)  # a call timed without its output
    # Fresh inputs with the call: the kernel works on them.
    timed = process.run(wire.encode(5), with_output=True)
    assert isinstance(timed, worker.Timed) and timed.reply["output"] == 10


def test_inputs_travel_as_raw_tensors_and_come_back_equal():
    data = {
        "x": torch.randn(3, 4),
        "view": torch.arange(10)[2:5],  # arrives contiguous, at its own size
        "half": torch.ones(2, dtype=torch.bfloat16),
        "empty": torch.empty(0, 3),
        "scalars": (7, 2.5, "name", None),
    }
    back = wire.decode(wire.encode(data))
    assert torch.equal(back["x"], data["x"]) and back["x"].dtype == torch.float32
    assert torch.equal(back["view"], torch.tensor([2, 3, 4]))
    assert back["view"].untyped_storage().nbytes() == 3 * 8
    assert back["half"].dtype == torch.bfloat16 and back["empty"].shape == (0, 3)
    assert back["scalars"] == (7, 2.5, "name", None)
    back["x"].add_(1)  # writable: a kernel may work in place on its own copy


@pytest.mark.reliability(
    "Faults",
    "the harness hangs up in the middle of a case's inputs",
    "the worker reads to the end of what came and stops: EOFError, nothing half-decoded",
)
def test_inputs_cross_a_pipe_as_raw_bytes_after_the_request_that_names_them(record_property):
    data = (torch.randn(512, 1024), torch.arange(6).reshape(2, 3), "label")
    ours, theirs = multiprocessing.Pipe()
    encoded = wire.encode(data)

    def send() -> None:  # beside the reader: a pipe holds far less than 2 MiB
        ours.send(("run", 1, (encoded, True)))
        wire.send_buffers(ours, (encoded, True))

    sender = threading.Thread(target=send)
    sender.start()
    request = theirs.recv_bytes()
    assert len(request) < 4096  # 2 MiB of tensors follow it, not inside it
    _, _, args = pickle.loads(request)
    wire.receive_buffers(theirs, args)
    sender.join()
    back = wire.decode(args[0])
    assert torch.equal(back[0], data[0]) and torch.equal(back[1], data[1])
    assert back[2] == "label" and args[1] is True
    assert args[0].sizes == (512 * 1024 * 4,)  # the small tensor went inside the pickle
    back[0].add_(1)  # the receiver's own memory, writable
    back[1].add_(1)
    assert not torch.equal(back[0], data[0]) and not torch.equal(back[1], data[1])
    ours.close()
    with pytest.raises(EOFError, match="hung up") as gone:  # the sender gone before the end
        theirs_only = wire.Encoded(b"", (16,))
        wire.receive_buffers(theirs, (theirs_only,))
    record_property("observed", f"EOFError: {gone.value}")


def test_the_stand_in_replays_a_call_as_long_as_told_with_an_output_like_the_held_one(
    zygote: Zygote,
):
    stand_in = workers.StandIn(zygote)
    try:
        assert stand_in.round_trip() > 0
        held = [torch.arange(1000), torch.ones(3)]  # one output per rank
        stand_in.send("stand_in", held)
        stand_in.message(stand_in.receive())
        inputs = wire.encode(torch.zeros(1000))
        for rank in (0, 1):
            call = case_run.time_call(
                [stand_in], [inputs], with_output=True, wait_ns=2e6, rank=rank
            )
            reply = stand_in.message(call.outputs[0])
            # It waits on the wall clock: a preemption on a loaded machine cannot shorten it.
            assert call.reported_ns >= 2e6
            assert call.reported_ns <= call.window_ns
            assert torch.equal(reply["output"], held[rank])
            # Its reply says how long it had waited for a CPU when its call began; the
            # harness read the same count, with the stand-in stopped, before sending it.
            assert reply["waited_ns"] >= call.waited_before_ns >= 0
            waited = stand_in.waited_before_call(call.waited_before_ns, reply)
            assert waited == reply["waited_ns"] - call.waited_before_ns
            # Stopped once its replies are in, before the call returns: it runs only while
            # asked something, and its waits are all counted.
            assert _state(stand_in.process.pid) == "T"
    finally:
        stand_in.stop()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_the_stand_in_cannot_be_traced_by_its_own_user(zygote: Zygote):
    stand_in = workers.StandIn(zygote)
    try:
        stand_in.round_trip()
        status = Path(f"/proc/{stand_in.process.pid}/status").read_text()
        # Undumpable: /proc/PID/fd, mem and environ are root's, and ptrace is refused.
        assert Path(f"/proc/{stand_in.process.pid}/fd").stat().st_uid == 0
        assert "TracerPid:\t0" in status
    finally:
        stand_in.stop()
