"""A result only SQLite's scan order decides, met inside an internal node: its owner recomputed whole.

A view's aggregating or DISTINCT FROM-subquery (or CTE, or plain view) is maintained as an
internal node (`matview.sql.nodes`). When a fold of the node meets a MIN/MAX tied between 1 and
1.0, or a group with several spellings SQLite calls equal ('a' and 'A' under NOCASE), the node
cannot say which one SQLite's scan would show (`fallback.HEALED`), and the user's view reading
it could not be folded: it stalled, and read as an error until it was dropped. As a CREATE over
the same rows makes such a view one recomputed whole, a fold that meets it does so too, in the
same transaction: the view's plan becomes whole recompute (`fallback.switch_to_whole`), its
nodes are dropped, and its pending changes fold again, now as ΔV = Q(I(A)) − V (the SELECT's
rows less the stored ones, DBSP's refresh as a delta), which reaches the views over it and the
change feed as any ΔV does. `WITH (recompute = 'never')` keeps the stall.
"""

from __future__ import annotations

import apsw

from matview import fallback, lifecycle
from matview.db import savepoint
from matview.errors import Error
from matview.fold import DeltaListener, fold_pending_deltas
from matview.registry import Registry, View
from matview.storage.state import clear_state_tables


def recompute_whole_instead(conn: apsw.Connection, registry: Registry, owner: View, marker: bytes) -> None:
    """Make `owner`, whose fold met `marker` in an internal node (`View.tied`), a view recomputed
    whole: its plan whole, its operator state and its nodes gone. Its progress marks stay, so the
    changes the stalled fold left pending make its next fold's ΔV the SELECT's rows − the stored
    ones."""
    reason = fallback.HEALED[marker]
    try:
        with savepoint(conn):
            nodes = registry.own_nodes(owner)
            if not fallback.switch_to_whole(conn, owner, reason):
                raise Error(
                    f"materialized view {owner.name} cannot be folded: {reason}, and it cannot be recomputed whole"
                )
            clear_state_tables(conn, owner.name)
            registry.invalidate()  # (its nodes are no longer read: they can be dropped)
            for node in reversed(nodes):  # (a node read by another node goes after it)
                lifecycle.drop_view(conn, registry, node.name, if_exists=True)
    finally:
        registry.invalidate()  # (also where the savepoint took the switch back: `owner` is stale)


def fold_healing_owners(
    conn: apsw.Connection, registry: Registry, views: list[View], listener: DeltaListener | None = None
) -> None:
    """`fold.fold_pending_deltas`, then: each view whose node met a tie is recomputed whole
    instead (where it may be: `fallback.may_heal_owner`), and `views` fold again. One that cannot
    be recomputed whole stays stalled (reading it says why)."""
    fold_pending_deltas(conn, registry, views, listener)
    tied = [(view, view.tied) for view in registry.views.values() if view.tied and fallback.may_heal_owner(view)]
    healed = False
    for owner, marker in tied:
        owner.tied = None  # (taken: a view object the registry keeps must not ask again)
        try:
            recompute_whole_instead(conn, registry, owner, marker)
            healed = True
        except Error:
            pass  # (stalled, as before)
    if healed:
        again = [found for view in views if (found := registry.get(view.name)) is not None]
        fold_pending_deltas(conn, registry, again, listener)
