"""How a case's inputs travel from the harness process to the workers (and the stand-in).

Inputs are made by the harness, which is trusted, so any picklable object may travel. Plain
tensors go as their raw bytes beside the pickle (dtype, shape, device): an order of magnitude
cheaper than `torch.save`'s zip archive, which matters because taking the inputs is inside
what the harness's clock sees of every ranked call. Strides and views sharing storage are not
kept: every tensor arrives contiguous and on its own, as a fresh input should.
"""

from __future__ import annotations

import io
import pickle
from typing import Any


def _torch() -> Any:
    import torch

    return torch


def _tensor_from_bytes(
    raw: bytes, dtype: str, shape: tuple[int, ...], device: str, requires_grad: bool
) -> Any:
    torch = _torch()
    kind = getattr(torch, dtype)
    if raw:
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(kind)
    else:
        flat = torch.empty(0, dtype=kind)
    tensor = flat.reshape(shape)
    tensor = tensor if device == "cpu" else tensor.to(device)
    return tensor.requires_grad_() if requires_grad else tensor


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        torch = _torch()
        if type(obj) is not torch.Tensor or obj.layout is not torch.strided or obj.is_quantized:
            return NotImplemented  # subclasses, sparse and quantized tensors: pickled whole
        flat = obj.detach().cpu().contiguous().reshape(-1)
        raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        dtype = str(obj.dtype).removeprefix("torch.")
        shape = tuple(obj.shape)
        return _tensor_from_bytes, (raw, dtype, shape, str(obj.device), obj.requires_grad)


def encode(value: Any) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def decode(raw: bytes) -> Any:
    """Only ever given bytes from the harness process (see the module's docstring)."""
    return pickle.loads(raw)  # noqa: S301 - written by the trusted harness, never a worker
