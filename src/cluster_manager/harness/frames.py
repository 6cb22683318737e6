"""Large tensors of a worker's reply travel as raw frames beside it.

`torch.save` copies every tensor into a growing buffer before the reply leaves. For outputs of
megabytes that copy takes milliseconds, and how long depends on the state of the sender's heap:
the submission's in a worker, ours in the stand-in. Two honest senders of one 8 MiB output
differed by 1.5 ms a call with two ranked runs sharing two cores: noise in the harness's
clock, which measures a call against the stand-in moving the same data (`trusted.py`).

So a plain, contiguous CPU tensor of `MIN_FRAME_BYTES` or more leaves as its own bytes, read
straight from the tensor's memory, and arrives in memory allocated for it; the reply names it
with a placeholder. A reply is one message: its frames' count and sizes, then `torch.save`'s
bytes of the reply (read with `weights_only`, never code); each frame follows as its size and
its bytes, written and read without a copy (`rawio.py`). A worker is the submission's
process: every count, size, dtype and shape it claims is checked before it is believed.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from cluster_manager.harness import rawio
from cluster_manager.harness.tensors import fold, map_tensors, same_type

FRAME_KEY = "\x00frame"  # no dict a task returns has this key
MIN_FRAME_BYTES = 64 * 1024
MAX_FRAMES = 4096
# What a reply's frames may claim in all: more than a worker could make, less than what
# would let a claim alone exhaust this process's address space.
MAX_FRAME_BYTES = 1 << 40
_COUNT = struct.Struct("<I")
_SIZE = struct.Struct("<Q")


class FrameError(ValueError):
    """A reply whose frames do not fit what it says of them."""


@dataclass(frozen=True)
class Received:
    """One reply as read off a connection: a duration or a reply's bytes, and its frames."""

    data: bytes
    frames: tuple[Any, ...] = ()  # flat uint8 tensors, in the order the reply numbers them


def _torch() -> Any:
    import torch

    return torch


def _framed(tensor: Any) -> bool:
    torch = _torch()
    return (
        type(tensor) is torch.Tensor
        and tensor.device.type == "cpu"
        and tensor.layout is torch.strided
        and not tensor.is_quantized
        and not tensor.requires_grad
        and not tensor.is_conj()
        and not tensor.is_neg()
        and tensor.is_contiguous()
        and tensor.storage_offset() == 0
        and tensor.numel() * tensor.element_size() >= MIN_FRAME_BYTES
    )


def split(reply: Any) -> tuple[Any, list[Any]]:
    """The reply with each large plain tensor replaced by a placeholder, and those tensors."""
    frames: list[Any] = []

    def placeholder(tensor: Any) -> Any:
        if not _framed(tensor):
            return tensor
        frames.append(tensor)
        dtype = str(tensor.dtype).removeprefix("torch.")
        return {FRAME_KEY: len(frames) - 1, "dtype": dtype, "shape": list(tensor.shape)}

    return map_tensors(reply, placeholder), frames


def header(frames: list[Any]) -> bytes:
    """What precedes a reply's own bytes: how many frames follow, and each one's size."""
    sizes = [t.numel() * t.element_size() for t in frames]
    return _COUNT.pack(len(frames)) + b"".join(_SIZE.pack(size) for size in sizes)


def send_frames(connection: Connection, frames: list[Any]) -> None:
    """Each frame as its size, then its bytes straight from the tensor's memory."""
    torch = _torch()
    for tensor in frames:
        raw = tensor.reshape(-1).view(torch.uint8).numpy()
        rawio.write_all(connection.fileno(), memoryview(_SIZE.pack(raw.size)))
        rawio.write_all(connection.fileno(), memoryview(raw.data))


def receive(connection: Connection, data: bytes) -> Received:
    """The frames announced by `data` (a reply's first message), each read into a buffer of
    its own; `data` loses its header."""
    count, sizes = _sizes(data)
    torch = _torch()
    frames = []
    for size in sizes:
        try:
            buffer = torch.empty(size, dtype=torch.uint8)
        except (RuntimeError, MemoryError):  # more than this process may hold
            raise FrameError(f"a frame announced as {size} bytes cannot be held") from None
        said = bytearray(_SIZE.size)
        rawio.read_into(connection.fileno(), memoryview(said))
        (got,) = _SIZE.unpack(said)
        if got != size:
            longer = "longer" if got > size else "shorter"
            raise FrameError(f"a frame announced as {size} bytes was {longer}")
        rawio.read_into(connection.fileno(), memoryview(buffer.numpy().data))
        frames.append(buffer)
    return Received(data[_COUNT.size + count * _SIZE.size :], tuple(frames))


def _sizes(data: bytes) -> tuple[int, list[int]]:
    if len(data) < _COUNT.size:
        raise FrameError("a reply too short to say its frames")
    (count,) = _COUNT.unpack_from(data)
    if count > MAX_FRAMES or len(data) < _COUNT.size + count * _SIZE.size:
        raise FrameError(f"a reply announced {count} frames")
    sizes = [_SIZE.unpack_from(data, _COUNT.size + i * _SIZE.size)[0] for i in range(count)]
    if sum(sizes) > MAX_FRAME_BYTES:
        raise FrameError(f"a reply announced {sum(sizes)} bytes of frames")
    return count, sizes


def join(reply: Any, frames: tuple[Any, ...]) -> Any:
    """The reply with each placeholder replaced by its frame, as the tensor it names. Every
    frame is used exactly once."""
    torch = _torch()
    used: set[int] = set()

    def tensor(placeholder: dict[str, Any]) -> Any:
        index, dtype_name, shape = (placeholder.get(k) for k in (FRAME_KEY, "dtype", "shape"))
        dtype = getattr(torch, str(dtype_name), None)
        if not isinstance(dtype, torch.dtype):
            raise FrameError(f"a frame's dtype {dtype_name!r} is not one of torch's")
        if (
            not isinstance(index, int)
            or not 0 <= index < len(frames)
            or index in used
            or not isinstance(shape, list)
            or not all(isinstance(n, int) and n >= 0 for n in shape)
        ):
            raise FrameError("a reply's placeholder does not name a frame of its own")
        used.add(index)
        frame = frames[index]
        itemsize = torch.empty((), dtype=dtype).element_size()
        if math.prod(shape) * itemsize != frame.numel():
            raise FrameError(f"a frame of {frame.numel()} bytes cannot hold {dtype} {shape}")
        return frame.view(dtype).reshape(shape)

    def node(container: Any, results: Any) -> Any:
        if isinstance(container, dict) and FRAME_KEY in container:
            return tensor(container)
        return same_type(container, results)

    joined = fold(reply, lambda value: value, node)
    if len(used) != len(frames):
        raise FrameError(f"a reply sent {len(frames)} frames and used {len(used)}")
    return joined
