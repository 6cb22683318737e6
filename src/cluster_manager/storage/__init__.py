"""Postgres: the asyncpg pool, migrations and every SQL statement of the project."""
