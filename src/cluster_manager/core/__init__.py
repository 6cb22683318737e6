"""Pure domain logic: no Discord, database, GitHub or Modal imports."""
