"""The tensor walkers share one recursion rule; what each keeps of a container's type."""

from __future__ import annotations

import collections

import torch

from cluster_manager.harness import tensors


class _Items(list):
    pass


def test_clone_copies_every_tensor_into_plain_containers():
    data = {"a": [torch.ones(2), (torch.zeros(1), 3)], "b": _Items([torch.ones(1)])}
    copied = tensors.clone(data)
    assert copied["a"][0] is not data["a"][0] and torch.equal(copied["a"][0], data["a"][0])
    assert type(copied["a"][1]) is tuple and copied["a"][1][1] == 3
    assert type(copied["b"]) is list


def test_map_keeps_the_container_types():
    doubled = tensors.map_tensors(_Items([torch.ones(1), 2]), lambda t: t * 2)
    assert (
        type(doubled) is _Items
        and doubled[1] == 2
        and torch.equal(doubled[0], torch.full((1,), 2.0))
    )


def test_first_device_finds_the_first_tensor_in_order():
    assert (
        tensors.first_device([1, {"x": (torch.ones(1, device="meta"),)}, torch.ones(1)]).type
        == "meta"
    )
    assert tensors.first_device({"a": [1, "b"]}) is None


def test_only_exact_containers_of_plain_values_are_plain():
    assert tensors.not_plain({"a": [torch.ones(1), (1, 2.0, "s", None)]}) is None
    assert "_Items" in tensors.not_plain([1, _Items()])
    assert "Point" in tensors.not_plain(collections.namedtuple("Point", "x")(torch.ones(1)))
    assert "object" in tensors.not_plain({"a": object()})
