"""The installation id: made once with the schema, the same on every read, new per database."""

from __future__ import annotations

import re

from cluster_manager.storage.database import create_pool
from cluster_manager.storage.installation import installation_id
from tests.support import database


async def test_the_installation_id_is_made_once_and_differs_per_database(pool, pg_server):
    first = await installation_id(pool)
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert await installation_id(pool) == first
    name = database.create_template(pg_server, "fresh")  # a database made anew
    try:
        other = await create_pool(database._with_database(pg_server, name), max_size=1)
        try:
            assert await installation_id(other) != first
        finally:
            await other.close()
    finally:
        database.drop(pg_server, name)
