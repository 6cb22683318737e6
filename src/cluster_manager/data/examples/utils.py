"""Helpers shared by the Python example tasks (copied next to each task as utils.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def device() -> torch.device:
    """Where inputs live: the GPU when there is one, else the CPU (tests run anywhere)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def set_seed(seed: int) -> None:
    seed %= 2**64
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def generator(seed: int, dev: torch.device | None = None) -> torch.Generator:
    """A private generator: the same seed gives the same data whatever ran before."""
    gen = torch.Generator(device=dev or device())
    gen.manual_seed(seed % 2**64)  # ranked seeds can exceed the 64 bits manual_seed accepts
    return gen


def compare(
    received: Any, expected: torch.Tensor, *, rtol: float, atol: float, max_report: int = 5
) -> tuple[bool, str]:
    """Compares element-wise with `allclose` semantics; the message says where and by how much."""
    if not isinstance(received, torch.Tensor):
        return False, f"expected a torch.Tensor, got {type(received).__name__}"
    if received.shape != expected.shape:
        return False, (
            f"shape mismatch: got {tuple(received.shape)}, expected {tuple(expected.shape)}"
        )
    if received.dtype != expected.dtype:
        return False, f"dtype mismatch: got {received.dtype}, expected {expected.dtype}"
    received = received.to(expected.device)
    if torch.allclose(received, expected, rtol=rtol, atol=atol):
        return True, ""
    bad = (~torch.isclose(received, expected, rtol=rtol, atol=atol)).nonzero()
    lines = [f"{bad.shape[0]} of {expected.numel()} elements differ (rtol={rtol}, atol={atol})"]
    for index in bad[:max_report].tolist():
        at = tuple(index)
        lines.append(
            f"  at {list(at)}: got {received[at].item():.6g}, expected {expected[at].item():.6g}"
        )
    if bad.shape[0] > max_report:
        lines.append(f"  ... and {bad.shape[0] - max_report} more")
    return False, "\n".join(lines)


def make_match_reference(
    reference: Callable[[Any], torch.Tensor], rtol: float = 1e-5, atol: float = 1e-8
) -> Callable[[Any, Any], tuple[bool, str]]:
    """Builds a check_implementation that compares the output with `reference(data)`."""

    def check_implementation(data: Any, output: Any) -> tuple[bool, str]:
        expected = reference(data)
        return compare(output, expected, rtol=rtol, atol=atol)

    return check_implementation
