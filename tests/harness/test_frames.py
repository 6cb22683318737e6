"""Large tensors of a reply travel as raw frames beside it: what arrives equals what was sent,
nothing else travels that way, and a sender's claims about its frames are checked before
they are believed (a worker is the submission's process)."""

from __future__ import annotations

import os
import struct
import threading

import pytest
import torch

from cluster_manager.harness import frames, worker, workers
from cluster_manager.harness.outcome import CaseFailed

BIG = frames.MIN_FRAME_BYTES // 4  # float32 elements of one frame's minimum


def _in_background(send) -> None:
    """Sends from a thread: frames outgrow the pipe's buffer before they are read."""
    threading.Thread(target=send, daemon=True).start()


def _send(connection, reply: dict) -> None:
    head, large = frames.split(reply)
    connection.send_bytes(frames.header(large) + worker.encode(head))
    frames.send_frames(connection, large)


def _round_trip(pipe, reply: dict) -> dict:
    ours, theirs = pipe
    _in_background(lambda: _send(theirs, reply))
    received = frames.receive(ours, ours.recv_bytes())
    return workers._parse(received)


def test_large_plain_tensors_go_as_frames_and_arrive_equal(pipe):
    reply = {
        "ok": True,
        "output": {
            "x": torch.randn(BIG, 2),
            "half": torch.ones(BIG * 2, dtype=torch.bfloat16),
            "pair": (torch.arange(BIG, dtype=torch.int64), 7),
            "small": torch.arange(3),
        },
    }
    head, large = frames.split(reply)
    assert len(large) == 3  # the small tensor stays in the reply
    assert head["output"]["small"] is reply["output"]["small"]
    back = _round_trip(pipe, reply)["output"]
    for key in ("x", "half", "small"):
        assert torch.equal(back[key], reply["output"][key])
        assert back[key].dtype == reply["output"][key].dtype
    assert torch.equal(back["pair"][0], reply["output"]["pair"][0]) and back["pair"][1] == 7
    back["x"].add_(1)  # writable: a check may work on it in place


@pytest.mark.parametrize(
    "tensor",
    [
        torch.randn(BIG, 4).t(),  # not contiguous: strides travel in the reply
        torch.randn(BIG, requires_grad=True),
        torch.randn(BIG, dtype=torch.complex64).conj(),
        torch.randn(BIG // 2),  # below the minimum
    ],
    ids=["transposed", "requires-grad", "conjugate-view", "small"],
)
def test_tensors_whose_bytes_do_not_say_all_stay_in_the_reply(pipe, tensor):
    _, large = frames.split({"output": tensor})
    assert large == []
    back = _round_trip(pipe, {"ok": True, "output": tensor.detach()})["output"]
    assert torch.equal(back, tensor.detach())


def test_a_reply_with_no_large_tensor_has_an_empty_header(pipe):
    assert _round_trip(pipe, {"ok": True, "output": [1, 2.5, "x"]})["output"] == [1, 2.5, "x"]


def _placeholder(index, dtype="float32", shape=(BIG,)):
    return {frames.FRAME_KEY: index, "dtype": dtype, "shape": list(shape)}


@pytest.mark.parametrize(
    ("output", "sent", "why"),
    [
        (_placeholder(1), 1, "does not name a frame"),
        ([_placeholder(0), _placeholder(0)], 1, "does not name a frame"),
        (_placeholder(0, dtype="Tensor"), 1, "is not one of torch's"),
        (_placeholder(0, shape=(BIG, 2)), 1, "cannot hold"),
        (_placeholder(0, shape=(-1,)), 1, "does not name a frame"),
        (1, 1, "sent 1 frames and used 0"),
    ],
    ids=["missing", "used-twice", "not-a-dtype", "wrong-size", "negative-shape", "unused"],
)
def test_a_placeholder_that_does_not_fit_its_frames_is_refused(pipe, output, sent, why):
    ours, theirs = pipe
    frame = torch.zeros(BIG)

    def send() -> None:
        head = {"ok": True, "output": output}
        theirs.send_bytes(frames.header([frame] * sent) + worker.encode(head))
        frames.send_frames(theirs, [frame] * sent)

    _in_background(send)
    received = frames.receive(ours, ours.recv_bytes())
    with pytest.raises(CaseFailed) as caught:
        workers._parse(received)
    assert "malformed reply" in caught.value.outcome.error and why in caught.value.outcome.error


def _announce(count: int, sizes: list[int]) -> bytes:
    return struct.pack("<I", count) + b"".join(struct.pack("<Q", s) for s in sizes)


def _send_raw_frame(connection, data: bytes) -> None:
    """A frame as a worker writes one: its size, then its bytes."""
    os.write(connection.fileno(), struct.pack("<Q", len(data)) + data)


@pytest.mark.parametrize(
    ("head", "then", "why"),
    [
        (_announce(frames.MAX_FRAMES + 1, []), [], "announced 4097 frames"),
        (_announce(2, [8]), [], "announced 2 frames"),
        (_announce(1, [frames.MAX_FRAME_BYTES + 1]), [], "bytes of frames"),
        (_announce(1, [8]), [b"x" * 9], "was longer"),
        (_announce(1, [8]), [b"x" * 7], "was shorter"),
        (b"\x01", [], "too short"),
        (_announce(1, [frames.MAX_FRAME_BYTES]), [], "cannot be held"),
    ],
    ids=["too-many", "sizes-missing", "too-big", "longer", "shorter", "no-count", "unholdable"],
)
def test_announced_frames_are_checked_before_they_are_believed(pipe, head, then, why):
    ours, theirs = pipe
    for message in then:
        _send_raw_frame(theirs, message)
    with pytest.raises(frames.FrameError, match=why):
        frames.receive(ours, head)


def test_a_peer_reports_a_malformed_frame_as_the_submissions_fault(pipe):
    ours, theirs = pipe
    peer = workers.Peer(ours)
    theirs.send_bytes(_announce(1, [8]))
    _send_raw_frame(theirs, b"x" * 9)
    with pytest.raises(CaseFailed) as caught:
        peer.receive()
    assert "sent a malformed reply: a frame announced as 8 bytes was longer" in (
        caught.value.outcome.error
    )
