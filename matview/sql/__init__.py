"""The front end: a user's SELECT becomes a Plan, one pass per module.

`validate` (one statement, probe columns, refusals) → `grouped_subqueries` and `nodes` (parts
that need state of their own become internal nodes) → `compound` (set operations cut into
arms) → `subquery_sources` → `inline` (views, CTEs, select-project-join subqueries flattened,
with `from_items` cutting FROM clauses) → `from_clause` (names resolved, `*` expanded) →
`frontend` (the Plan: select list, WHERE, GROUP BY, HAVING cut from the user's own text) with
`subqueries` and `subquery_values` for expressions that read other tables. `sqltext` is the
tokenizer every pass shares.
"""
