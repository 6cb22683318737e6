"""Walks over the nested lists, tuples and dicts of tensors that tasks pass around.

`fold` holds the one recursion rule; every walker the harness and its workers use is built on
it. torch is imported only when a walker runs: the runner imports this package without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

# Builds a container's result from the container and its children's results.
Rebuild = Callable[[Any, Iterator[Any]], Any]

_CONTAINERS = (list, tuple, dict)
# Values that are data whatever reads them: nothing runs when they are read.
_PLAIN = (int, float, complex, bool, str, bytes, type(None))


def _tensor() -> Any:  # torch.Tensor, imported only where tensors are handled
    import torch

    return torch.Tensor


def fold(
    value: Any,
    leaf: Callable[[Any], Any],
    node: Rebuild,
    *,
    exact: bool = False,
) -> Any:
    """`leaf(value)` for anything but a container; for a container, `node(container, results)`
    with its children's folds as a lazy iterator, in order (a dict's values), so a search can
    stop at its first find. `exact`: subclasses of list, tuple and dict are leaves, not
    containers."""
    container = type(value) in _CONTAINERS if exact else isinstance(value, _CONTAINERS)
    if not container:
        return leaf(value)
    children = value.values() if isinstance(value, dict) else value
    return node(value, (fold(child, leaf, node, exact=exact) for child in children))


def same_type(container: Any, results: Iterator[Any]) -> Any:
    """A list or tuple of the container's own type; a plain dict with the container's keys."""
    if isinstance(container, dict):
        return dict(zip(container.keys(), results, strict=True))
    return type(container)(results)


def plain_type(container: Any, results: Iterator[Any]) -> Any:
    """A plain dict, tuple or list, whatever subclass the container was."""
    if isinstance(container, dict):
        return dict(zip(container.keys(), results, strict=True))
    return tuple(results) if isinstance(container, tuple) else list(results)


def map_tensors(value: Any, function: Callable[[Any], Any], rebuild: Rebuild = same_type) -> Any:
    """`value` with every tensor in it replaced by `function(tensor)`; the rest kept."""
    tensor = _tensor()
    return fold(value, lambda v: function(v) if isinstance(v, tensor) else v, rebuild)


def first(value: Any, function: Callable[[Any], Any], *, exact: bool = False) -> Any:
    """The first of `function`'s results over the leaves of `value` that is not empty."""
    return fold(value, function, lambda _, results: next(filter(None, results), None), exact=exact)


def first_device(data: Any) -> Any:
    """The device of the first tensor in `data`, None without one."""
    tensor = _tensor()

    def device(value: Any) -> Any:
        return value.device if isinstance(value, tensor) else None

    return first(data, device)


def to_device_of(output: Any, data: Any) -> Any:
    """Outputs arrive on the CPU; the check compares them where the inputs live."""
    device = first_device(data)
    if device is None or device.type == "cpu":
        return output
    return map_tensors(output, lambda t: t.to(device))


def clone(data: Any) -> Any:
    """Deep copy of every tensor in `data`: the kernel never touches inputs kept for later."""
    return map_tensors(data, lambda t: t.clone(), plain_type)


def compact(output: Any) -> Any:
    """Tensors that view a larger storage are copied down to their own size: `torch.save`
    writes the whole storage, and the harness times the transfer against its own estimate."""
    return map_tensors(output, _own_storage)


def _own_storage(tensor: Any) -> Any:
    own = tensor.numel() * tensor.element_size()
    return tensor.clone() if tensor.untyped_storage().nbytes() > own else tensor


def not_plain(output: Any) -> str | None:
    """Why `output` is not plain data, if it is not: a tensor subclass (or any object) could
    compute its values when the check reads them, after the timer stopped."""
    reason: str | None = first(output, _not_plain_leaf, exact=True)
    return reason


def _not_plain_leaf(value: Any) -> str | None:
    kind = type(value)
    if kind is _tensor() or kind in _PLAIN:
        return None
    return f"the output must be plain tensors, not {kind.__module__}.{kind.__qualname__}"
