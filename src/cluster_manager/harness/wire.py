"""How a case's inputs travel from the harness process to the workers (and the stand-in).

Inputs are made by the harness, which is trusted, so any picklable object may travel. Plain
tensors go as their raw bytes, written to the pipe straight from the tensor's memory after
the pickle that names them (dtype, shape, device) and read straight into the memory of the
tensor that receives them: taking the inputs is inside what the harness's clock sees of every
ranked call, and megabytes copied four times more than they must be are milliseconds of noise
on both sides of every pair (tensors under 64 KiB stay inside the pickle). Strides and views
sharing storage are not kept: every tensor arrives contiguous and on its own, as a fresh input
should.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from cluster_manager.harness import rawio

MIN_OUT_OF_BAND_BYTES = 64 * 1024


def _torch() -> Any:
    import torch

    return torch


@dataclass
class Encoded:
    """A value as it travels: its pickle, and the raw bytes of its tensors, which follow the
    request that carries it on the same pipe (only their sizes travel inside the request)."""

    head: bytes
    sizes: tuple[int, ...]
    buffers: list[Any] = field(default_factory=list)  # each `sizes` bytes, in order

    def __getstate__(self) -> dict[str, Any]:
        return {"head": self.head, "sizes": self.sizes, "buffers": []}


def _tensor_from_frame(
    frame: Any, dtype: str, shape: tuple[int, ...], device: str, requires_grad: bool
) -> Any:
    torch = _torch()
    import numpy

    raw = numpy.frombuffer(frame, dtype=numpy.uint8)
    if isinstance(frame, pickle.PickleBuffer):  # the sender's own memory: a decode in place
        raw = raw.copy()
    kind = getattr(torch, dtype)
    flat = torch.from_numpy(raw).view(kind) if raw.size else torch.empty(0, dtype=kind)
    tensor = flat.reshape(shape)
    tensor = tensor if device == "cpu" else tensor.to(device)
    return tensor.requires_grad_() if requires_grad else tensor


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        torch = _torch()
        if type(obj) is not torch.Tensor or obj.layout is not torch.strided or obj.is_quantized:
            return NotImplemented  # subclasses, sparse and quantized tensors: pickled whole
        flat = obj.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
        dtype = str(obj.dtype).removeprefix("torch.")
        frame = pickle.PickleBuffer(flat)
        return _tensor_from_frame, (
            frame,
            dtype,
            tuple(obj.shape),
            str(obj.device),
            obj.requires_grad,
        )


def encode(value: Any) -> Encoded:
    buffers: list[pickle.PickleBuffer] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        """Small tensors stay inside the pickle (as a bytearray, writable where it lands):
        thousands of them would be thousands of writes and reads."""
        if buffer.raw().nbytes < MIN_OUT_OF_BAND_BYTES:
            return True
        buffers.append(buffer)
        return False

    head = io.BytesIO()
    _Pickler(head, protocol=5, buffer_callback=out_of_band).dump(value)
    return Encoded(head.getvalue(), tuple(b.raw().nbytes for b in buffers), buffers)


def decode(encoded: Encoded) -> Any:
    """Only ever given what the harness process encoded (see the module's docstring)."""
    return pickle.loads(encoded.head, buffers=encoded.buffers)  # noqa: S301 - from the harness


def raw_size(args: tuple[Any, ...]) -> int:
    """How many raw bytes follow a request with these `args` (`send_buffers`)."""
    return sum(sum(value.sizes) for value in args if isinstance(value, Encoded))


def send_buffers(connection: Connection, args: tuple[Any, ...]) -> None:
    """Writes the raw bytes of each `Encoded` in a request's `args`, after the request."""
    for value in args:
        if isinstance(value, Encoded):
            for buffer in value.buffers:  # the harness's own: `encode`'s PickleBuffers
                rawio.write_all(connection.fileno(), buffer.raw())


def receive_buffers(connection: Connection, args: tuple[Any, ...]) -> None:
    """Reads the raw bytes that follow a request into fresh memory for each `Encoded` in its
    `args`, ready for `decode`."""
    import numpy

    for value in args:
        if isinstance(value, Encoded):
            value.buffers = []
            for size in value.sizes:
                buffer = numpy.empty(size, dtype=numpy.uint8)
                rawio.read_into(connection.fileno(), memoryview(buffer.data))
                value.buffers.append(buffer)
