"""Reads the YAML files organisers write (task.yml, competition files) without trusting them:
a size cap before parsing, UTF-8 text only, safe tags only, and no aliases (YAML bombs)."""

from __future__ import annotations

from typing import Any

import yaml

from cluster_manager.core.errors import InvalidTaskError


class NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors/aliases: they are how YAML bombs multiply."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
            raise yaml.composer.ComposerError(
                None, None, f"aliases are not allowed in {self.name}", event.start_mark
            )
        return super().compose_node(parent, index)


def decode_text(data: bytes, file: str, error: type[InvalidTaskError] = InvalidTaskError) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(file, None, f"not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:  # never in source code, and Postgres text cannot hold it
        raise error(file, None, f"not text: a NUL byte at byte {data.index(0)}")
    return text


def parse_mapping(
    data: bytes,
    file: str,
    *,
    max_bytes: int,
    error: type[InvalidTaskError] = InvalidTaskError,
) -> dict[str, Any]:
    """The YAML mapping in `data`, or `error` naming `file` and what is wrong."""
    if len(data) > max_bytes:
        raise error(file, None, f"{len(data)} bytes is over the limit of {max_bytes}")
    text = decode_text(data, file, error)
    try:
        loader = NoAliasLoader(text)  # its reader refuses control characters already
        loader.name = file
        try:
            spec = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise error(file, None, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise error(file, None, "nested too deeply") from None
    if not isinstance(spec, dict):
        raise error(file, None, "must be a mapping of keys to values")
    return spec
