"""A view's circuit as a picture: the operator DAG, each node's incremental rule, its state.

`describe` reads a view's plan (`matview.plan`) and the file (state sizes, pending deltas)
into a small graph of `Node`s; `as_tree` draws it as a rich Tree for the terminal, `as_dot`
as Graphviz source (`graphviz` renders it to SVG/PNG when the `dot` binary is installed),
`as_dict` as JSON-ready data. The graph runs from sources (base tables' delta logs,
upstream views) to the stored view; a derived table's hidden view is drawn as its own
sub-circuit feeding the view that reads it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import apsw
from rich.console import Console
from rich.tree import Tree

from matview import names
from matview.db import scalar
from matview.fold import pending_ranges
from matview.names import is_node, quote
from matview.operators import scalar_values
from matview.operators.aggregate import GROUPS_OP
from matview.operators.distinct import DISTINCT_OP
from matview.operators.set_operation import SET_OPERATION_OP
from matview.plan import render
from matview.registry import Registry, View
from matview.sql.sqltext import excerpt


@dataclass
class Node:
    """One operator of the circuit."""

    id: str
    kind: str  # source | upstream | join | map | subquery | aggregate | having | distinct | set | whole | view
    label: str
    rule: str  # how it turns input changes into output changes
    details: list[str] = field(default_factory=list)
    state: list[tuple[str, int]] = field(default_factory=list)  # (state table or part, rows)
    inputs: list[str] = field(default_factory=list)  # ids of the nodes feeding it


@dataclass
class Circuit:
    """A view's operators, root (the stored view) last."""

    view: str
    nodes: list[Node]

    @property
    def root(self) -> Node:
        return self.nodes[-1]

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)


_RULES = {
    "source": "its delta log: triggers record each committed row change with weight ±1",
    "upstream": "reads the upstream view's ΔV of the same fold (views fold upstream first)",
    "upstream_whole": "read as any reader reads it (stored rows, pending changes merged); folds first",
    "join": "bilinear: Δ(A⋈B) = ΔA⋈B + A⋈ΔB + ΔA⋈ΔB, one delta term per changed input, probing the others",
    "map": "linear (σ/π): Δ(σπ R) = σπ(ΔR), SQLite runs the SELECT over the deltas only",
    "subquery": "a change on either side re-evaluates the outer rows it reaches (−old +new)",
    "aggregate": "per changed group: state ⊕ Δ (count, sums; min/max from ordered state), emit −old +new row",
    "having": "linear on the group rows: filter/compute over each emitted −old/+new row",
    "distinct": "keeps a count per row; emits +1 / −1 only when a count crosses zero (DBSP Prop. 4.7)",
    "set": "keeps per-arm counts per row; emits when membership flips",
    "view": "V ← V + ΔV: upsert weights, delete rows reaching 0",
    "whole": "ΔV = Q(I(A)) − V: the SELECT, as written, re-run at every fold that meets a change",
}


def _count(conn: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> int:
    try:
        return int(scalar(conn, sql, params) or 0)
    except apsw.SQLError:  # not created (yet) for this view
        return 0


def _state_rows(conn: apsw.Connection, view: str, op_lo: int, op_hi: int) -> list[tuple[str, int]]:
    found = []
    for table in (names.state_table(view), names.ordered_state_table(view)):
        rows = _count(conn, f"SELECT count(*) FROM {quote(table)} WHERE operator_id BETWEEN ? AND ?", (op_lo, op_hi))
        if rows:
            found.append((table, rows))
    return found


def describe(conn: apsw.Connection, registry: Registry, view: View) -> Circuit:
    """Read `view`'s circuit, with state sizes and pending counts as the file holds them now."""
    nodes: list[Node] = []
    _describe(conn, registry, view, nodes, prefix="")
    return Circuit(view.name, nodes)


def _describe(conn: apsw.Connection, registry: Registry, view: View, nodes: list[Node], prefix: str) -> str:
    plan = view.entry.plan
    pending = {table: hi - lo for table, lo, hi in pending_ranges(conn, view)}
    in_subquery = {number for reach in plan.subquery_reach for number in reach.occurrences}
    outer = [n for n in range(len(plan.sources)) if n not in in_subquery]
    source_ids = {table: _source(conn, registry, view, table, pending, nodes, prefix) for table in plan.tables}
    current = list(dict.fromkeys(source_ids[plan.sources[n]] for n in outer))
    if len(outer) > 1 and not plan.arms and not plan.whole:
        joined = ", ".join(_occurrence(plan.aliases, plan.sources, n) for n in outer)
        kind = f"{plan.outer_kind} OUTER JOIN" if plan.outer_on else "JOIN"
        details = [f"{kind} of {joined}"]
        details += [f"index {name}" for name in plan.indexes] or ["indexes: none needed"]
        details += [f"SCAN: {scan}" for scan in plan.scans]
        current = [_add(nodes, prefix, "join", f"{kind} ⋈", details, current)]
    elif plan.arms:
        current = [_add(nodes, prefix, "map", "arms", [f"{len(plan.arms)} arms"], current)]
    if in_subquery:
        probes = [f"compares {table}.{column} by =" for table, column, _ in plan.subquery_probes]
        # (`operators.scalar_values`: the roots whose conjunct a new value flips)
        probes += [
            f"reaches by value: {excerpt(scalar_values.conjunct_as_written(value, _source_names(plan.sources)), 80)}"
            for _k, value in plan.value_reaches
        ]
        reads = list(dict.fromkeys(source_ids[plan.sources[n]] for n in sorted(in_subquery)))
        current.append(_add(nodes, prefix, "subquery", "subqueries", probes, reads))
    if plan.whole:  # (`sql.whole`: ΔV = Q(I(A)) − V at every fold)
        details = [plan.whole, *([f"why: {plan.whole_reason}"] if plan.whole_reason else [])]
        current = [_add(nodes, prefix, "whole", "recomputed whole", details, current)]
    else:
        current = _operators(conn, view, outer, nodes, prefix, current)
    stored = _count(conn, f"SELECT count(*) FROM {quote(names.view_table(view.name))}")
    title = f"hidden view {view.name}" if is_node(view.name) else f"view {view.name}"
    details = [f"{view.entry.maintenance}, {sum(pending.values())} pending delta rows"]
    if view.broken or view.stalled:
        details.append(f"NOT MAINTAINED: {view.broken or view.stalled}")
    state = [(f"{names.view_table(view.name)} (stored rows)", stored)]
    node = Node(f"{prefix}view", "view", title, _RULES["view"], details, state)
    node.inputs = current
    nodes.append(node)
    return node.id


def _operators(
    conn: apsw.Connection, view: View, outer: list[int], nodes: list[Node], prefix: str, current: list[str]
) -> list[str]:
    """The operator nodes of an incremental view's circuit after its sources: stage 1, then the
    aggregate, set operation and DISTINCT its plan has."""
    plan = view.entry.plan
    stage1 = render(plan.stage1, weight="1", outer=plan.outer_kind or "LEFT", **_source_names(plan.sources))
    map_details = [stage1]
    if len(outer) == 1:
        map_details += [f"index {name}" for name in plan.indexes] + [f"SCAN: {scan}" for scan in plan.scans]
    kept: list[tuple[str, int]] = []
    if plan.root_recompute:  # (partition recompute: each root's stage-1 rows are kept)
        kept_table = names.kept_rows_table(view.name)
        kept = [(f"{kept_table} (rows per root)", _count(conn, f"SELECT count(*) FROM {quote(kept_table)}"))]
    current = [_add(nodes, prefix, "map", "filter / project (stage 1)", map_details, current, kept)]
    if plan.kind == "aggregate":
        calls = [spec.sql or spec.func for spec in plan.aggs if spec.func != "bare"]
        bare = [spec.sql for spec in plan.aggs if spec.func == "bare"]
        if plan.extreme_row:  # (`operators.bare_columns`)
            extreme = next((spec.sql for spec in plan.aggs if spec.func in ("min", "max")), None)
            row = f"the row {extreme} keeps" if extreme else "each group's first row (by rowid)"
            calls.append(f"{', '.join(bare) or 'the GROUP BY spelling'} from {row}: ordered state by (value, rowid)")
        grouping = f"GROUP BY {plan.group_count} column(s)" if plan.has_group_by else "one group (no GROUP BY)"
        details = [grouping, *calls]
        state = _state_rows(conn, view.name, GROUPS_OP, DISTINCT_OP - 1)
        current = [_add(nodes, prefix, "aggregate", "aggregate γ", details, current, state)]
        if plan.having or plan.post_exprs:
            details = [f"HAVING {plan.having}"] if plan.having else []
            current = [_add(nodes, prefix, "having", "per-group project / HAVING", details, current)]
    if plan.set_operation:
        state = _state_rows(conn, view.name, SET_OPERATION_OP, SET_OPERATION_OP)
        current = [_add(nodes, prefix, "set", plan.set_operation, [], current, state)]
    if plan.distinct:
        state = _state_rows(conn, view.name, DISTINCT_OP, DISTINCT_OP)
        current = [_add(nodes, prefix, "distinct", "DISTINCT", [], current, state)]
    return current


def _source(
    conn: apsw.Connection,
    registry: Registry,
    view: View,
    table: str,
    pending: dict[str, int],
    nodes: list[Node],
    prefix: str,
) -> str:
    """The node of one distinct source: a base table's delta log, an upstream view, or the
    sub-circuit of a hidden view (a derived table's)."""
    node_id = f"{prefix}src:{table}"
    if table in view.entry.plan.upstream_views:
        inner = registry.get(table)
        if inner is not None and is_node(inner.name):
            return _describe(conn, registry, inner, nodes, prefix=f"{prefix}{table}/")
        size = _count(conn, f"SELECT count(*) FROM {quote(names.view_table(table))}")
        rule = _RULES["upstream_whole" if view.entry.plan.whole else "upstream"]
        nodes.append(Node(node_id, "upstream", f"view {table}", rule, [f"{size} stored rows"]))
        return node_id
    log = _count(conn, f"SELECT count(*) FROM {quote(names.delta_table(table))}")
    details = [
        f"delta log {names.delta_table(table)}: {log} rows",
        f"pending for this view: {pending.get(table, 0)}",
    ]
    nodes.append(Node(node_id, "source", f"table {table}", _RULES["source"], details))
    return node_id


def _occurrence(aliases: tuple[str, ...], sources: tuple[str, ...], number: int) -> str:
    alias = aliases[number] if number < len(aliases) else sources[number]
    return sources[number] if alias == sources[number] else f"{alias} ({sources[number]})"


def _add(
    nodes: list[Node],
    prefix: str,
    kind: str,
    label: str,
    details: list[str],
    inputs: list[str],
    state: list[tuple[str, int]] | None = None,
) -> str:
    node = Node(f"{prefix}{kind}{len(nodes)}", kind, label, _RULES[kind], details, state or [], inputs)
    nodes.append(node)
    return node.id


def _source_names(sources: tuple[str, ...]) -> dict[str, str]:
    return {f"source{i}": quote(table) for i, table in enumerate(sources)}


# -- drawing ------------------------------------------------------------------------


def as_tree(circuit: Circuit) -> Tree:
    """The circuit as a rich Tree, the stored view at the root and its inputs below."""
    root = Tree(_heading(circuit.root))
    _grow(circuit, circuit.root, root)
    return root


def _heading(node: Node) -> str:
    return f"[bold]{_escape(node.label)}[/bold] [dim]({node.kind})[/dim]"


def _grow(circuit: Circuit, node: Node, branch: Tree) -> None:
    branch.add(f"[italic]rule:[/italic] {_escape(node.rule)}")
    for detail in node.details:
        style = "red" if detail.startswith(("SCAN", "NOT MAINTAINED")) else ""
        text = _escape(detail)
        branch.add(f"[{style}]{text}[/{style}]" if style else text)
    for table, rows in node.state:
        branch.add(f"[cyan]state {_escape(table)}: {rows} rows[/cyan]")
    for input_id in node.inputs:
        child = circuit.node(input_id)
        _grow(circuit, child, branch.add(_heading(child)))


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


def as_text(circuit: Circuit, width: int = 120) -> str:
    """The tree as plain text (what `ViewInfo.explain()` returns)."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(as_tree(circuit))
    return console.export_text()


def as_dict(circuit: Circuit) -> dict[str, Any]:
    """JSON-ready: the nodes (with their inputs) and the edges."""
    return {
        "view": circuit.view,
        "nodes": [
            {
                "id": n.id,
                "kind": n.kind,
                "label": n.label,
                "rule": n.rule,
                "details": n.details,
                "state": [{"table": t, "rows": r} for t, r in n.state],
                "inputs": n.inputs,
            }
            for n in circuit.nodes
        ],
        "edges": [[source, n.id] for n in circuit.nodes for source in n.inputs],
    }


_SHAPES = {"source": "cylinder", "upstream": "cylinder", "view": "box3d"}
_COLORS = {"source": "#dbe9f6", "upstream": "#e3dbf6", "view": "#d9f2d9", "aggregate": "#fbe5c8", "join": "#f6dbe0"}


def as_dot(circuit: Circuit) -> str:
    """Graphviz source of the circuit (data flows from sources up to the view); written
    here, so it needs neither the `graphviz` package nor the `dot` binary."""
    ids = {node.id: f"n{number}" for number, node in enumerate(circuit.nodes)}
    lines = [
        f"digraph {_dot_string(circuit.view)} {{",
        '  graph [rankdir=BT, fontname="Helvetica"];',
        '  node [fontname="Helvetica", fontsize=10, style=filled, shape=box];',
    ]
    for node in circuit.nodes:
        rows = [f"<B>{_html(node.label)}</B>", f"<I>{_html(_wrap(node.rule))}</I>"]
        rows += [_html(_wrap(d)) for d in node.details]
        rows += [_html(f"state {t}: {r} rows") for t, r in node.state]
        shape, color = _SHAPES.get(node.kind, "box"), _COLORS.get(node.kind, "#f2f2f2")
        lines.append(f'  {ids[node.id]} [label=<{"<BR/>".join(rows)}>, shape={shape}, fillcolor="{color}"];')
        lines += [f'  {ids[source]} -> {ids[node.id]} [label="Δ"];' for source in node.inputs]
    lines.append("}")
    return "\n".join(lines)


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_image(circuit: Circuit, image_format: str) -> bytes:
    """The picture as SVG or PNG bytes (needs Graphviz's `dot` binary)."""
    import graphviz

    return bytes(graphviz.Source(as_dot(circuit)).pipe(format=image_format))


def _wrap(text: str, width: int = 60) -> str:
    words, lines, line = text.split(" "), [], ""
    for word in words:
        if line and len(line) + len(word) > width:
            lines.append(line)
            line = ""
        line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


def _html(text: str) -> str:
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace("\n", "<BR/>")
