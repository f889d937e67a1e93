"""DBSP operators, one concept per module; each docstring states its incremental rule."""
