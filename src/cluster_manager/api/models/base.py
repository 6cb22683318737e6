"""What every model of the API shares: frozen, unknown fields ignored (a newer server's
additions never break an older client), times as `datetime.isoformat` writes them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema


class ApiModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


def _from_iso(value: object) -> object:
    # `datetime.fromisoformat`'s own reading: "+00:00" becomes `timezone.utc`, as the server
    # stored it, so a record read back equals the one written.
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def _iso(moment: datetime) -> str:
    return moment.isoformat()


# A moment as the API has always written it ("2099-01-01T00:00:00+00:00", not pydantic's "Z").
Moment = Annotated[
    datetime,
    BeforeValidator(_from_iso),
    PlainSerializer(_iso, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


def _is_none(value: object) -> bool:
    return value is None


def left_out_when_none() -> Any:
    """A field the answer leaves out, rather than writing null, when it has no value."""
    return Field(default=None, exclude_if=_is_none)
