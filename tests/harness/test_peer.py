"""How the harness talks to a worker or the stand-in (`workers.Peer`): a small request is
written before the other end may run, and a timed call's duration and output come back as one
reply, which nothing else can stand in for."""

from __future__ import annotations

import pickle
import struct
import threading
from typing import Any

import pytest
import torch

from cluster_manager.harness import frames, worker, workers
from cluster_manager.harness.outcome import CaseFailed


class Watched(workers.Peer):
    """A peer that notes, each time it lets the other end run, whether the request is there."""

    def __init__(self, ours: Any, theirs: Any) -> None:
        super().__init__(ours)
        self.theirs = theirs
        self.waiting_at_thaw: list[bool] = []

    def thaw(self) -> None:
        self.waiting_at_thaw.append(self.theirs.poll())


def _token(theirs: Any) -> int:
    _step, token, _args = pickle.loads(theirs.recv_bytes())
    return int(token)


def test_a_small_request_is_written_before_its_process_may_run(pipe):
    ours, theirs = pipe
    peer = Watched(ours, theirs)
    peer.send("run", None, True, 0.0, 0)
    _token(theirs)
    # One too large to be sure of the buffer: the process runs first, and reads as it comes.
    peer.send("run", b"x" * workers.WRITTEN_FIRST_BYTES, True, 0.0, 0)
    _token(theirs)
    assert peer.waiting_at_thaw == [True, False]


def _answer(theirs: Any, reply: Any, token_offset: int = 0) -> threading.Thread:
    """Answers the peer's request from a thread (a large reply fills the buffer)."""
    token = _token(theirs) + token_offset
    sender = threading.Thread(target=worker._send, args=(theirs, reply, token))
    sender.start()
    return sender


def test_a_timed_reply_brings_the_duration_and_the_output_together(pipe):
    ours, theirs = pipe
    peer = workers.Peer(ours)
    output = torch.arange(1 << 16)  # 512 KiB: a raw frame after the message
    peer.send("run", None, True, 0.0, 0)
    sender = _answer(theirs, worker.Timed(1234.0, {"ok": True, "output": output}))
    duration, reply = peer.receive_timed()
    sender.join()
    assert duration == 1234.0
    assert len(reply.frames) == 1
    assert torch.equal(peer.message(reply)["output"], output)


@pytest.mark.parametrize(
    ("reply", "token_offset", "why"),
    [
        (1234.0, 0, "sent a duration without its output"),
        ({"ok": False, "error": "boom", "verdict": "runtime_error"}, 0, "boom"),
        (worker.Timed(1.0, {"ok": True, "output": 1}), 1, "replied out of turn"),
        ({"ok": True, "output": 1}, 0, "sent no duration"),
    ],
    ids=["duration-alone", "failure", "ahead-of-its-request", "output-alone"],
)
def test_a_timed_call_answered_otherwise_fails_the_case(pipe, reply, token_offset, why):
    ours, theirs = pipe
    peer = workers.Peer(ours)
    peer.send("run", None, True, 0.0, 0)
    _answer(theirs, reply, token_offset).join()
    with pytest.raises(CaseFailed) as caught:
        peer.receive_timed()
    assert why in caught.value.outcome.error


def test_no_other_reply_can_begin_like_a_timed_one():
    """A reply's first four bytes are its frame count: the mark's are more than any may be."""
    assert struct.unpack_from("<I", worker.TIMED_MARK)[0] > frames.MAX_FRAMES
