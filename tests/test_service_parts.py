"""`Service` is one object holding its parts by role: no class in `service/` is assembled from
mixins, each part declares its own state in its constructor, and `Service` itself offers
nothing but its parts and the context they share. The CLI's port has the same shape."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Protocol, get_type_hints

from cluster_manager.service import Service
from cluster_manager.service.facade import PARTS
from cluster_manager.service.port import ServicePort

SERVICE = Path(__file__).resolve().parents[1] / "src" / "cluster_manager" / "service"
# Bases that do not make a mixin: a protocol, or an error deriving from another error.
PLAIN_BASES = {"object", "Protocol", "Exception"}
# What `Service` holds besides its parts: the context they share, for the composition root.
SHARED = {"pool", "registry", "clock"}


def _bases(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b) for b in node.bases]


def _classes() -> list[tuple[str, ast.ClassDef]]:
    return [
        (path.name, node)
        for path in sorted(SERVICE.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
    ]


def test_no_class_in_the_service_has_more_than_one_real_base():
    errors = {"ClusterManagerError", *(n.name for _, n in _classes() if n.name.endswith("Error"))}
    mixed = [
        f"{module}: {node.name}({', '.join(_bases(node))})"
        for module, node in _classes()
        if len([b for b in _bases(node) if b not in PLAIN_BASES | errors]) > 1
    ]
    assert _classes() and mixed == []


def test_service_offers_only_its_parts_and_their_context(service: Service):
    public = {name for name in vars(service) if not name.startswith("_")}
    assert public == set(PARTS) | SHARED
    methods = [n for n, v in vars(Service).items() if callable(v) and not n.startswith("_")]
    assert methods == []


def test_each_part_is_a_plain_class_that_declares_its_state_in_its_constructor(
    service: Service,
):
    for name in PARTS:
        part = type(getattr(service, name))
        assert part.__bases__ == (object,), name
        assert part.__module__.startswith("cluster_manager.service."), name
        # The old mixins declared what they shared at class level (`pool: asyncpg.Pool`).
        assert inspect.get_annotations(part) == {}, name
        assert "__init__" in vars(part), name


def test_no_part_is_held_twice(service: Service):
    held = [type(getattr(service, name)) for name in PARTS]
    assert len(set(held)) == len(held)


def test_the_cli_port_has_the_parts_of_the_service_by_the_same_names(service: Service):
    """Each part of `ServicePort` is a protocol that the same-named part of `Service` has
    every method of (mypy checks their signatures where cli/common.py assigns it)."""
    ported = {
        name: get_type_hints(member.fget)["return"]
        for name, member in vars(ServicePort).items()
        if isinstance(member, property)
    }
    assert ported and set(ported) <= set(PARTS)
    for name, protocol in ported.items():
        assert Protocol in protocol.__mro__, name
        wanted = [n for n in vars(protocol) if not n.startswith("_")]
        missing = [n for n in wanted if not callable(getattr(getattr(service, name), n, None))]
        assert wanted and missing == [], name
