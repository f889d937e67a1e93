#!/usr/bin/env python
"""Core benchmark for matview (incrementally maintained materialized views on SQLite/apsw).

Runs everything in ONE process and interleaves the variants being compared (view / no view /
raw apsw / Turso ...) iteration by iteration, rotating the order, so that machine noise hits all
of them equally.  Reports MEDIANS and RATIOS; absolute numbers are printed only for context.

    python bench/bench_core.py [--rows 100000] [--big-rows 1000000] [--quick] [--iters 400]
                               [--views V1,V2,V4] [--no-turso] [--json out.json] [--keep]

See bench/README.md.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import apsw  # noqa: E402

try:
    import matview

    matview.connect  # noqa: B018  (engine may still be a skeleton)
    MATVIEW_IMPORT_ERROR = None
except Exception as e:  # pragma: no cover - engine being written concurrently
    matview = None
    MATVIEW_IMPORT_ERROR = f"{type(e).__name__}: {e}"

try:
    import turso

    TURSO_IMPORT_ERROR = None
except Exception as e:  # pragma: no cover
    turso = None
    TURSO_IMPORT_ERROR = f"{type(e).__name__}: {e}"

perf_ns = time.perf_counter_ns

VIEWS = {
    "V1": "SELECT id, x*2 AS y FROM t WHERE x % 3 = 0",
    "V2": "SELECT g, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY g",
    "V4": "SELECT g, MIN(x), MAX(x) FROM t GROUP BY g",
}

# issue 8's targets (V4's 10,000-row transaction: TXN10K_V4)
TARGET = {
    "write_immediate": 2.0,
    "write_deferred": 1.2,
    "read_pending_ms": 20.0,
    "growth": 1.2,
    "txn10k": 2.0,
    "create": 1.5,
    "point": 1.5,
    "scan": 2.0,
}
TXN10K_V4 = 3.0

OPS = {
    "INSERT": "INSERT INTO t(g, x, s) VALUES (?, ?, ?)",
    "UPDATE": "UPDATE t SET g = ?, x = ? WHERE id = ?",
    "DELETE": "DELETE FROM t WHERE id = ?",
}

X_MAX = 1_000_000
G_MAX = 1000

PROBLEMS: list[str] = []  # engine problems (matview)
TURSO_NOTES: list[str] = []  # Turso refusals / crashes / wrong results


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def problem(msg: str) -> None:
    PROBLEMS.append(msg)
    log("ENGINE PROBLEM: " + msg.splitlines()[0])


def short_exc(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    s = " ".join(s.split())
    return s if len(s) <= 140 else s[:137] + "..."


# --------------------------------------------------------------------------- data / files


def rand_row(rng: random.Random):
    return (rng.randrange(G_MAX), rng.randrange(X_MAX), f"s{rng.randrange(10**9):09d}")


def build_base(path: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    c = apsw.Connection(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=NORMAL")
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, x INT, s TEXT)")
    with c:
        c.executemany(
            "INSERT INTO t(id, g, x, s) VALUES (?, ?, ?, ?)",
            ((i, *rand_row(rng)) for i in range(1, n + 1)),
        )
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()


def copy_db(src: str, dst: str) -> str:
    for suffix in ("-wal", "-shm"):
        if os.path.exists(dst + suffix):
            os.remove(dst + suffix)
    shutil.copyfile(src, dst)
    if os.path.exists(src + "-wal"):
        shutil.copyfile(src + "-wal", dst + "-wal")
    return dst


def remove_db(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass


# --------------------------------------------------------------------------- connections


def fetch(c, sql, params=()):
    cur = c.execute(sql, params)
    if cur is None:
        return []
    if hasattr(cur, "fetchall"):
        return cur.fetchall()
    return list(cur)


def pragma(c, sql):
    try:
        fetch(c, sql)
    except Exception:
        if hasattr(c, "apsw"):
            fetch(c.apsw, sql)
        else:
            raise


def open_mv(path):
    c = matview.connect(path)
    pragma(c, "PRAGMA journal_mode=WAL")
    pragma(c, "PRAGMA synchronous=NORMAL")
    return c


def open_raw(path):
    c = apsw.Connection(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=NORMAL")
    return c


def open_turso(path):
    c = turso.connect(path, experimental_features="views")
    for q in ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"):
        try:
            c.execute(q).fetchall()
        except Exception:
            pass
    return c


OPENERS = {"mv": lambda p: open_mv(p), "raw": open_raw, "turso": open_turso}


def create_view_sql(kind: str, name: str, select: str, mode: str | None) -> str:
    if kind == "mv":
        return f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {select}"
    return f"CREATE MATERIALIZED VIEW {name} AS {select}"


class Arm:
    """One connection taking part in interleaved loops."""

    def __init__(
        self, key: str, kind: str, path: str, view: str | None = None, vname: str = "", init_sql: str | None = None
    ):
        self.key, self.kind, self.path, self.view = key, kind, path, view
        self.vname, self.init_sql = vname, init_sql
        self.init_ns = None
        self.conn = None
        self.error: str | None = None
        self.samples: dict[str, list[int]] = collections.defaultdict(list)
        self.extra: dict[str, list[int]] = collections.defaultdict(list)

    def open(self):
        self.conn = OPENERS[self.kind](self.path)
        if self.init_sql:
            t0 = perf_ns()
            fetch(self.conn, self.init_sql)
            if self.kind == "turso" and getattr(self.conn, "in_transaction", False):
                self.conn.commit()
            self.init_ns = perf_ns() - t0
            self.init_sql = None  # only once (not again on reopen)
        return self

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except BaseException as e:
                if isinstance(e, KeyboardInterrupt):
                    raise
            self.conn = None

    def fail(self, where: str, e: BaseException):
        if self.error is None:
            self.error = f"{where}: {short_exc(e)}"
            tb = traceback.format_exc()
            if self.kind == "mv":
                problem(f"[{self.vname} {self.key}] {where} raised {short_exc(e)}\n{tb}")
            elif self.kind == "turso":
                TURSO_NOTES.append(f"[{self.vname} {self.key}] {where}: {short_exc(e)}")
                log(f"turso failure [{self.vname} {self.key}] {where}: {short_exc(e)}")
            else:
                log(f"raw apsw failure [{self.key}] {where}: {short_exc(e)}")

    def med(self, phase: str):
        s = self.samples.get(phase)
        return statistics.median(s) if s else None


def interleave(arms, n: int, warmup: int, phase: str, fn):
    """Run fn(arm, i) -> ns for i in range(warmup + n), rotating/alternating arm order."""
    gc.collect()
    gc.disable()
    try:
        for i in range(warmup + n):
            live = [a for a in arms if a.error is None]
            if not live:
                return
            k = i % len(live)
            order = live[k:] + live[:k]
            if i & 1:
                order.reverse()
            for a in order:
                try:
                    dt = fn(a, i)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as e:  # pyo3 PanicException is a BaseException
                    a.fail(phase, e)
                    continue
                if i >= warmup:
                    a.samples[phase].append(dt)
    finally:
        gc.enable()


def timed_write(c, sql, params):
    t0 = perf_ns()
    with c:
        c.execute(sql, params)
    return perf_ns() - t0


def timed_fetch(c, sql, params=()):
    t0 = perf_ns()
    fetch(c, sql, params)
    return perf_ns() - t0


# --------------------------------------------------------------------------- correctness


def typed_bag(rows):
    return collections.Counter(tuple((type(v).__name__, v) for v in r) for r in rows)


def numeric_bag(rows):
    def norm(v):
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    return collections.Counter(tuple(norm(v) for v in r) for r in rows)


def compare_rows(got, want) -> str | None:
    """None if same bag (values AND types); else a short description with one aligned example."""
    gb, wb = typed_bag(got), typed_bag(want)
    if gb == wb:
        return None
    extra = sorted((gb - wb).elements(), key=repr)
    missing = sorted((wb - gb).elements(), key=repr)
    ng, nw = numeric_bag(got), numeric_bag(want)
    kind = "types only" if ng == nw else "values"
    n_val = sum((nw - ng).values())

    def show(r):
        return "(" + ", ".join(f"{v!r}" for _, v in r) + ")"

    ex = ""
    if missing:
        m = missing[0]
        twin = next((e for e in extra if e[:1] == m[:1]), None)
        ex = f"e.g. SELECT has {show(m)}" + (f", view has {show(twin)}" if twin else ", view lacks it")
    elif extra:
        ex = f"e.g. view has extra {show(extra[0])}"
    return (
        f"{kind}: view {len(got)} rows vs SELECT {len(want)} rows; {len(missing)} SELECT rows not in view "
        f"({n_val} differ in value, {len(missing) - n_val} only in type); {ex}"
    )


def check_view(arm: Arm, select: str, when: str) -> str:
    """Compare SELECT * FROM v with the defining SELECT re-run on the same connection."""
    if arm.error:
        return "n/a (" + arm.error.split(":")[0] + ")"
    try:
        got = fetch(arm.conn, f"SELECT * FROM {arm.view}")
        want = fetch(arm.conn, select)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        arm.fail(f"check {when}", e)
        return "error: " + short_exc(e)
    diff = compare_rows(got, want)
    if diff is None:
        return "ok"
    msg = f"[{arm.vname} {arm.key}] view differs from SELECT {when}: {diff}"
    if arm.kind == "mv":
        problem(msg)
    else:
        TURSO_NOTES.append(msg)
        log("turso wrong: " + msg)
    return "WRONG" if arm.kind == "mv" else "wrong (" + diff.split(":")[0] + ")"


# --------------------------------------------------------------------------- formatting


def fmt_t(ns) -> str:
    if ns is None:
        return "-"
    if ns < 1_000_000:
        return f"{ns / 1000:.0f}µs" if ns >= 10_000 else f"{ns / 1000:.1f}µs"
    if ns < 10_000_000_000:
        return f"{ns / 1e6:.1f}ms" if ns < 100_000_000 else f"{ns / 1e6:.0f}ms"
    return f"{ns / 1e9:.1f}s"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(a, b, show_abs=True) -> str:
    r = ratio(a, b)
    if r is None:
        return "-"
    return f"{r:.2f}x ({fmt_t(a)} vs {fmt_t(b)})" if show_abs else f"{r:.2f}x"


def arm_cell(arm: Arm | None, base: Arm | None, phase: str, show_abs=True) -> str:
    if arm is None:
        return "n/a"
    if arm.error:
        return ("ERROR in " if arm.kind == "mv" else "Turso error in ") + arm.error
    if base is None:
        return "n/a"
    if base.error:
        return "baseline error: " + base.error
    return fmt_ratio(arm.med(phase), base.med(phase), show_abs)


def met(r, target) -> str:
    if r is None:
        return "?"
    return "yes" if r <= target else "NO"


ROWS: list[dict] = []


def add_row(measure, view, mode, mv, raw="", tu="", target="", ok=""):
    ROWS.append(dict(measure=measure, view=view, mode=mode, matview=mv, raw=raw, turso=tu, target=target, met=ok))


# --------------------------------------------------------------------------- phases


class Ctx:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.base = os.path.join(tmp, "base.db")
        self.big = os.path.join(tmp, "base_big.db")
        self.do_big = not args.quick and args.big_rows > 0
        self.use_mv = matview is not None
        self.use_turso = turso is not None and not args.no_turso
        self.results: dict = {}


def p(ctx, name):
    return os.path.join(ctx.tmp, name)


def turso_view_arm(ctx: Ctx, vname: str, select: str, phase: str) -> Arm:
    """A Turso connection on a fresh copy of the base, its view (re)created in the measuring
    connection (a Turso view reopened from a closed file can be wrong)."""
    path = copy_db(ctx.base, p(ctx, f"{vname}_tview_{phase}.db"))
    return Arm("t_view", "turso", path, "v", vname, create_view_sql("turso", "v", select, None))


def phase_create(ctx: Ctx, vname: str, select: str):
    """Time CREATE MATERIALIZED VIEW vs CTAS; leave rep-0 DBs for reads and last-rep DBs for writes."""
    reps = ctx.args.create_reps
    tasks = []
    if ctx.use_mv:
        tasks += [("mv", "imm", "immediate"), ("mv", "def", "deferred"), ("mv", "ctas", None)]
    if ctx.use_turso:
        tasks += [("turso", "tview", None), ("turso", "tctas", None)]
    times = collections.defaultdict(list)
    status = {}
    out = {}
    for r in range(reps):
        order = tasks[r % len(tasks) :] + tasks[: r % len(tasks)] if tasks else []
        if r & 1:
            order.reverse()
        for kind, tag, mode in order:
            if tag in status:  # already failed
                continue
            path = copy_db(ctx.base, p(ctx, f"{vname}_{tag}_r{r}.db"))
            c = None
            try:
                c = OPENERS[kind](path)
                if tag in ("ctas", "tctas"):
                    sql = f"CREATE TABLE p AS {select}"
                else:
                    sql = create_view_sql(kind, "v", select, mode)
                gc.collect()
                t0 = perf_ns()
                fetch(c, sql)
                if kind == "turso" and getattr(c, "in_transaction", False):
                    c.commit()
                times[tag].append(perf_ns() - t0)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:
                status[tag] = short_exc(e)
                if kind == "mv":
                    problem(f"[{vname}/{tag}] CREATE failed: {short_exc(e)}\n{traceback.format_exc()}")
                else:
                    TURSO_NOTES.append(f"[{vname}] Turso refused/failed CREATE ({tag}): {short_exc(e)}")
                    log(f"turso {vname} {tag} CREATE failed: {short_exc(e)}")
            finally:
                if c is not None:
                    try:
                        c.close()
                    except BaseException:
                        pass
            if r == 0:
                out[(tag, "read")] = path
            if r == reps - 1:
                out[(tag, "write")] = path
            elif r != 0:
                remove_db(path)
    med = {k: statistics.median(v) for k, v in times.items()}
    ctx.results.setdefault(vname, {})["create_ns"] = med

    def tcell():
        if not ctx.use_turso:
            return "n/a"
        if "tview" in status:
            return "refused: " + status["tview"]
        if "tctas" in status:
            return "CTAS failed: " + status["tctas"]
        return fmt_ratio(med.get("tview"), med.get("tctas"))

    for tag, mode in (("imm", "immediate"), ("def", "deferred")):
        if not ctx.use_mv:
            continue
        if tag in status:
            add_row(
                "CREATE vs CTAS", vname, mode, "ERROR: " + status[tag], "", tcell(), f"<= {TARGET['create']}x", "NO"
            )
            continue
        r_ = ratio(med.get(tag), med.get("ctas"))
        add_row(
            "CREATE vs CTAS",
            vname,
            mode,
            fmt_ratio(med.get(tag), med.get("ctas")),
            "",
            tcell() if tag == "imm" else "n/a (no deferred mode)",
            f"<= {TARGET['create']}x",
            met(r_, TARGET["create"]),
        )
    return out, status


def phase_reads(ctx: Ctx, vname: str, select: str, paths, status):
    """Full scan of the view vs the same rows in a plain table; V1 also indexed point lookups."""
    arms = []
    if ctx.use_mv and "imm" not in status and "ctas" not in status:
        arms += [
            Arm("mv_view", "mv", paths[("imm", "read")], "v", vname),
            Arm("mv_plain", "mv", paths[("ctas", "read")], "p", vname),
        ]
    t_ok = ctx.use_turso and "tview" not in status and "tctas" not in status
    if t_ok:
        arms += [
            # Turso: the view is (re)created in the measuring connection; a Turso view reopened from a
            # closed file can be wrong (checked separately, "after reopen")
            turso_view_arm(ctx, vname, select, "rd"),
            Arm("t_plain", "turso", paths[("tctas", "read")], "p", vname),
        ]
    for a in arms:
        try:
            a.open()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            a.fail("open", e)
    by = {a.key: a for a in arms}
    # correctness right after CREATE (view vs its SELECT)
    corr = {}
    for key in ("mv_view", "t_view"):
        if key in by:
            corr[key] = check_view(by[key], select, "after CREATE")
    scan_phase = "scan"
    interleave(arms, ctx.args.scan_reps, 2, scan_phase, lambda a, i: timed_fetch(a.conn, f"SELECT * FROM {a.view}"))

    def cell(v, pl):
        a, b = by.get(v), by.get(pl)
        if a is None:
            return "n/a" if v == "mv_view" or not ctx.use_turso else ("refused" if "tview" in status else "n/a")
        return arm_cell(a, b, scan_phase)

    scan_ratio = None
    if by.get("mv_view") is not None and by.get("mv_plain") is not None:
        scan_ratio = ratio(by["mv_view"].med(scan_phase), by["mv_plain"].med(scan_phase))
    add_row(
        "full scan SELECT * vs plain table",
        vname,
        "immediate",
        cell("mv_view", "mv_plain"),
        "",
        cell("t_view", "t_plain"),
        f"<= {TARGET['scan']}x",
        met(scan_ratio, TARGET["scan"]),
    )

    if vname == "V1":
        # indexed point lookup
        ys = []
        src = by.get("mv_plain") or by.get("t_plain")
        if src is not None and src.error is None:
            ys = [r[0] for r in fetch(src.conn, "SELECT y FROM p")]
        rng = random.Random(11)
        look = [
            rng.choice(ys) if ys and k % 10 else rng.randrange(0, 2 * X_MAX) for k in range(ctx.args.point_reps + 50)
        ]
        idx_time = {}
        for a in arms:
            if a.error:
                continue
            try:
                t0 = perf_ns()
                fetch(a.conn, f"CREATE INDEX {a.view}_y ON {a.view}(y)")
                if a.kind == "turso" and getattr(a.conn, "in_transaction", False):
                    a.conn.commit()
                idx_time[a.key] = perf_ns() - t0
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:
                a.fail("CREATE INDEX", e)
        # verify lookups equal between view and plain table (per engine)
        wrong = {}
        for v, pl in (("mv_view", "mv_plain"), ("t_view", "t_plain")):
            a, b = by.get(v), by.get(pl)
            if a is None or b is None or a.error or b.error:
                continue
            bad = 0
            first = None
            for y in look[:200]:
                try:
                    got = fetch(a.conn, f"SELECT * FROM {a.view} WHERE y = ?", (y,))
                    want = fetch(b.conn, "SELECT * FROM p WHERE y = ?", (y,))
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as e:
                    a.fail("point lookup", e)
                    break
                if typed_bag(got) != typed_bag(want):
                    bad += 1
                    first = first or (y, got, want)
            if bad:
                msg = (
                    f"[V1 {v}] indexed point lookup 'SELECT * FROM v WHERE y = ?' differs from plain table "
                    f"in {bad}/200 probes, e.g. y={first[0]}: view {first[1]} vs table {first[2]}"
                )
                wrong[v] = bad
                (problem if v == "mv_view" else TURSO_NOTES.append)(msg)
        interleave(
            arms,
            ctx.args.point_reps,
            50,
            "point",
            lambda a, i: timed_fetch(a.conn, f"SELECT * FROM {a.view} WHERE y = ?", (look[i],)),
        )

        def pcell(v, pl):
            a, b = by.get(v), by.get(pl)
            if a is None:
                return "n/a"
            c = arm_cell(a, b, "point")
            if v in wrong:
                c = f"wrong ({wrong[v]}/200 lookups) " + c
            return c

        mva, mvb = by.get("mv_view"), by.get("mv_plain")
        r_ = ratio(mva.med("point"), mvb.med("point")) if mva and mvb and not mva.error and not mvb.error else None
        ok = met(r_, TARGET["point"])
        if "mv_view" in wrong:
            ok = "NO (wrong)"
        add_row(
            "indexed point lookup vs plain+index",
            vname,
            "immediate",
            pcell("mv_view", "mv_plain"),
            "",
            pcell("t_view", "t_plain"),
            f"<= {TARGET['point']}x",
            ok,
        )
        if idx_time:
            add_row(
                "CREATE INDEX on view vs on plain table",
                vname,
                "immediate",
                fmt_ratio(idx_time.get("mv_view"), idx_time.get("mv_plain")),
                "",
                fmt_ratio(idx_time.get("t_view"), idx_time.get("t_plain")),
                "(none)",
                "",
            )
    for a in arms:
        a.close()
    ctx.results.setdefault(vname, {})["reads"] = {
        a.key: {k: statistics.median(v) for k, v in a.samples.items()} for a in arms
    }
    return corr


def make_big_views(ctx: Ctx, vname: str, select: str, status):
    """Copy the big base and create the view(s) on it (matview immediate+deferred, Turso)."""
    out = {}
    tags = []
    if ctx.use_mv:
        tags += [("mv", "imm1M", "immediate"), ("mv", "def1M", "deferred")]
    if ctx.use_turso and "tview" not in status:
        tags += [("turso", "tview1M", None)]
    for kind, tag, mode in tags:
        if tag[:-2] in status or (tag == "imm1M" and "imm" in status) or (tag == "def1M" and "def" in status):
            continue
        path = copy_db(ctx.big, p(ctx, f"{vname}_{tag}.db"))
        if kind == "turso":  # created inside the measuring connection (see phase_writes)
            out[tag] = path
            continue
        c = None
        try:
            c = OPENERS[kind](path)
            t0 = perf_ns()
            fetch(c, create_view_sql(kind, "v", select, mode))
            if kind == "turso" and getattr(c, "in_transaction", False):
                c.commit()
            dt = perf_ns() - t0
            log(f"  {vname} {tag}: CREATE on {ctx.args.big_rows} rows took {fmt_t(dt)}")
            ctx.results.setdefault(vname, {}).setdefault("create_big_ns", {})[tag] = dt
            out[tag] = path
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            if kind == "mv":
                problem(f"[{vname}/{tag}] CREATE on big table failed: {short_exc(e)}\n{traceback.format_exc()}")
            else:
                TURSO_NOTES.append(f"[{vname}] Turso CREATE on big table failed: {short_exc(e)}")
        finally:
            if c is not None:
                try:
                    c.close()
                except BaseException:
                    pass
    return out


def gen_write_params(rng, n_rows, n):
    """Same parameters for every arm.  Deleted ids are never updated."""
    ids = list(range(1, n_rows + 1))
    rng.shuffle(ids)
    del_ids = ids[:n]
    upd_pool = ids[n:]
    ins = [rand_row(rng) for _ in range(n)]
    upd = [(rng.randrange(G_MAX), rng.randrange(X_MAX), rng.choice(upd_pool)) for _ in range(n)]
    dele = [(i,) for i in del_ids]
    return {"INSERT": ins, "UPDATE": upd, "DELETE": dele}, upd_pool


def flush_deferred(arms):
    for a in arms:
        if a.kind == "mv" and a.error is None and "def" in a.key:
            try:
                a.conn.flush()
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:
                a.fail("flush", e)


def phase_writes(ctx: Ctx, vname: str, select: str, paths, status, big_paths):
    args = ctx.args
    all_arms = []
    if ctx.use_mv:
        if "imm" not in status:
            all_arms.append(Arm("mv_imm", "mv", paths[("imm", "write")], "v", vname))
        if "def" not in status:
            all_arms.append(Arm("mv_def", "mv", paths[("def", "write")], "v", vname))
        all_arms.append(Arm("mv_nov", "mv", copy_db(ctx.base, p(ctx, f"{vname}_nov.db")), None, vname))
    all_arms.append(Arm("raw", "raw", copy_db(ctx.base, p(ctx, f"{vname}_raw.db")), None, vname))
    if ctx.use_turso and "tview" not in status:
        remove_db(paths[("tview", "write")])
        all_arms.append(turso_view_arm(ctx, vname, select, "wr"))
        all_arms.append(Arm("t_nov", "turso", copy_db(ctx.base, p(ctx, f"{vname}_tnov.db")), None, vname))
    small = list(all_arms)
    if ctx.do_big:
        for tag, key, kind in (
            ("imm1M", "mv_imm_1M", "mv"),
            ("def1M", "mv_def_1M", "mv"),
            ("tview1M", "t_view_1M", "turso"),
        ):
            if tag in big_paths:
                all_arms.append(
                    Arm(
                        key,
                        kind,
                        big_paths[tag],
                        "v",
                        vname,
                        create_view_sql("turso", "v", select, None) if kind == "turso" else None,
                    )
                )
        if ctx.use_mv:
            all_arms.append(Arm("mv_nov_1M", "mv", copy_db(ctx.big, p(ctx, f"{vname}_nov1M.db")), None, vname))
        if ctx.use_turso and "t_view_1M" in [a.key for a in all_arms]:
            all_arms.append(Arm("t_nov_1M", "turso", copy_db(ctx.big, p(ctx, f"{vname}_tnov1M.db")), None, vname))
    for a in all_arms:
        try:
            a.open()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            a.fail("open", e)
        if a.init_ns is not None:
            log(f"  {vname} {a.key}: CREATE (in measuring connection) took {fmt_t(a.init_ns)}")
    by = {a.key: a for a in all_arms}
    corr = {
        a.key + "@create": check_view(a, select, "right after CREATE (same connection)")
        for a in all_arms
        if a.kind == "turso" and a.view and not a.error
    }
    rng = random.Random(1000 + int(vname[1:]))
    n = args.iters
    warm = args.warmup
    params, upd_pool = gen_write_params(rng, args.rows, n + warm)
    for op, sql in OPS.items():
        log(f"  {vname}: {n}+{warm} single-row {op} txns x {len([a for a in all_arms if not a.error])} connections")
        ps = params[op]
        interleave(all_arms, n, warm, op, lambda a, i, sql=sql, ps=ps: timed_write(a.conn, sql, ps[i]))
        t0 = time.time()
        flush_deferred(all_arms)
        log(f"    ({op} loop done; flush of deferred views took {time.time() - t0:.2f}s)")
    t_chk = time.time()

    # sanity: every arm executed the same writes
    counts = {}
    for a in all_arms:
        if a.error:
            continue
        try:
            counts[a.key] = fetch(a.conn, "SELECT count(*) FROM t")[0][0]
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            a.fail("count", e)
    small_counts = {k: v for k, v in counts.items() if not k.endswith("_1M")}
    if len(set(small_counts.values())) > 1:
        problem(f"[{vname}] row counts of t differ between connections after identical writes: {small_counts}")

    corr.update({a.key: check_view(a, select, "after single-row writes") for a in all_arms if a.view and not a.error})
    log(f"    (row-count + view checks took {time.time() - t_chk:.2f}s)")

    # ---- report single-row writes
    nov, raw, tnov, tview = by.get("mv_nov"), by["raw"], by.get("t_nov"), by.get("t_view")
    for mode, key, tgt in (
        ("immediate", "mv_imm", TARGET["write_immediate"]),
        ("deferred", "mv_def", TARGET["write_deferred"]),
    ):
        arm = by.get(key)
        for op in OPS:
            if not ctx.use_mv:
                mvc, rawc, ok = "n/a", "n/a", ""
            elif arm is None:
                mvc, rawc, ok = "ERROR (CREATE failed)", "", "NO"
            else:
                mvc = arm_cell(arm, nov, op)
                rawc = arm_cell(arm, raw, op, show_abs=False)
                r_ = None if arm.error or nov.error else ratio(arm.med(op), nov.med(op))
                ok = "NO" if arm.error else met(r_, tgt)
            if mode == "immediate":
                tc = arm_cell(tview, tnov, op) if tview else ("refused" if ctx.use_turso else "n/a")
            else:
                tc = "n/a (no deferred mode)"
            add_row(f"1-row {op} txn vs no view", vname, mode, mvc, rawc, tc, f"<= {tgt}x", ok)
    if nov is not None:
        for op in OPS:
            ctx.results.setdefault("wrapper", collections.defaultdict(list))[op].append(ratio(nov.med(op), raw.med(op)))

    # ---- growth
    if ctx.do_big:
        for mode, key in (("immediate", "mv_imm"), ("deferred", "mv_def")):
            a100, a1m = by.get(key), by.get(key + "_1M")
            if not ctx.use_mv:
                continue
            if a100 is None or a1m is None or a100.error or a1m.error:
                add_row(
                    f"1-row write cost {args.big_rows // 1000}k vs {args.rows // 1000}k rows",
                    vname,
                    mode,
                    "ERROR",
                    "",
                    "",
                    f"<= {TARGET['growth']}x",
                    "NO",
                )
                continue
            rs = {op: ratio(a1m.med(op), a100.med(op)) for op in OPS}
            worst = max(rs.values())
            detail = " ".join(f"{op[0]}{rs[op]:.2f}" for op in OPS)
            nv, nv1 = by.get("mv_nov"), by.get("mv_nov_1M")
            ctxt = ""
            if nv and nv1 and not nv.error and not nv1.error:
                ctxt = "no-view " + " ".join(f"{op[0]}{ratio(nv1.med(op), nv.med(op)):.2f}" for op in OPS)
            tc = "n/a"
            if mode == "immediate":
                t1, t1m = by.get("t_view"), by.get("t_view_1M")
                if t1 and t1m and not t1.error and not t1m.error:
                    trs = {op: ratio(t1m.med(op), t1.med(op)) for op in OPS}
                    tc = f"{max(trs.values()):.2f}x worst (" + " ".join(f"{op[0]}{trs[op]:.2f}" for op in OPS) + ")"
                elif t1m and t1m.error:
                    tc = "crashed/err: " + t1m.error
                elif ctx.use_turso and "tview" in status:
                    tc = "refused"
            add_row(
                f"1-row write cost {args.big_rows // 1000}k vs {args.rows // 1000}k rows",
                vname,
                mode,
                f"{worst:.2f}x worst ({detail})",
                ctxt,
                tc,
                f"<= {TARGET['growth']}x",
                met(worst, TARGET["growth"]),
            )
    # big arms no longer needed
    for a in all_arms:
        if a not in small:
            a.close()
            remove_db(a.path)

    # ---- deferred read after 1000 pending writes
    phase_deferred_read(ctx, vname, select, by, upd_pool)

    # ---- 10k-row transaction
    phase_txn10k(ctx, vname, small, by)

    # ---- final correctness (after flush) and after reopen
    flush_deferred(small)
    corr2 = {a.key: check_view(a, select, "after 10k txns + flush") for a in small if a.view}
    for a in small:
        a.close()
    corr3 = {}
    for a in small:
        if not a.view or a.error:
            continue
        try:
            a.open()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            a.fail("reopen", e)
            corr3[a.key] = "reopen failed"
            continue
        corr3[a.key] = check_view(a, select, "after reopen")
        a.close()
    for a in small:
        remove_db(a.path)
    ctx.results.setdefault(vname, {})["arms"] = {
        a.key: {
            "error": a.error,
            "median_ns": {k: statistics.median(v) for k, v in a.samples.items() if v},
            "extra_median_ns": {k: statistics.median(v) for k, v in a.extra.items() if v},
        }
        for a in all_arms
    }
    return corr, corr2, corr3


def phase_deferred_read(ctx, vname, select, by, upd_pool):
    args = ctx.args
    arms = [by[k] for k in ("mv_def", "mv_imm", "t_view") if k in by and by[k].error is None]
    if not arms:
        return
    rng = random.Random(77 + int(vname[1:]))
    pend = args.pending
    log(f"  {vname}: read after {pend} pending writes, {args.pending_rounds} rounds x 2 (pending / flushed)")

    def batch():
        out = []
        for k in range(pend):
            if k & 1:
                out.append((OPS["UPDATE"], (rng.randrange(G_MAX), rng.randrange(X_MAX), rng.choice(upd_pool))))
            else:
                out.append((OPS["INSERT"], rand_row(rng)))
        return out

    for rnd in range(args.pending_rounds):
        for flushed in (False, True):
            b = batch()
            order = arms if (rnd + flushed) % 2 == 0 else arms[::-1]
            for a in order:
                if a.error:
                    continue
                try:
                    t0 = perf_ns()
                    for sql, prm in b:
                        with a.conn:
                            a.conn.execute(sql, prm)
                    a.extra["pending_writes_total"].append(perf_ns() - t0)
                    if flushed and a.kind == "mv":
                        t0 = perf_ns()
                        a.conn.flush()
                        a.extra["flush"].append(perf_ns() - t0)
                    gc.collect()
                    gc.disable()
                    try:
                        t0 = perf_ns()
                        fetch(a.conn, "SELECT * FROM v")
                        dt = perf_ns() - t0
                    finally:
                        gc.enable()
                    a.extra["read_flushed" if flushed else "read_pending"].append(dt)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as e:
                    a.fail("deferred-read phase", e)
            if rnd == 0 and not flushed:
                # untimed: more pending writes on every arm, then view vs SELECT with deltas pending
                b2 = batch()[:50]
                for a in arms:
                    if a.error:
                        continue
                    try:
                        for sql, prm in b2:
                            with a.conn:
                                a.conn.execute(sql, prm)
                    except (KeyboardInterrupt, SystemExit):
                        raise
                    except BaseException as e:
                        a.fail("deferred-read phase", e)
                d = by.get("mv_def")
                if d is not None and d.error is None:
                    res = check_view(d, select, "with deferred deltas pending")
                    if res != "ok":
                        add_row("view == SELECT with deltas pending", vname, "deferred", res, "", "", "ok", "NO")

    def ms(a, k):
        s = a.extra.get(k)
        return statistics.median(s) if s else None

    d, im, tv = by.get("mv_def"), by.get("mv_imm"), by.get("t_view")
    if ctx.use_mv:
        if d is None or d.error:
            add_row(f"read SELECT * after {pend} pending writes", vname, "deferred", "ERROR", "", "", "", "NO")
        else:
            rp = ms(d, "read_pending")
            tgt = f"<= {TARGET['read_pending_ms']:.0f}ms" if vname == "V2" else "(V2 only)"
            ok = met(rp / 1e6, TARGET["read_pending_ms"]) if vname == "V2" else ""
            tcell = (
                fmt_t(ms(tv, "read_pending")) + " (no pending: immediate)"
                if tv and not tv.error
                else ("n/a" if not tv else "err: " + tv.error)
            )
            imm_txt = f"immediate view {fmt_t(ms(im, 'read_pending'))}" if im and not im.error else ""
            add_row(f"read SELECT * after {pend} pending writes", vname, "deferred", fmt_t(rp), imm_txt, tcell, tgt, ok)
            add_row(
                "read SELECT * after flush()",
                vname,
                "deferred",
                f"{fmt_t(ms(d, 'read_flushed'))} (flush {fmt_t(ms(d, 'flush'))})",
                f"immediate view {fmt_t(ms(im, 'read_flushed'))}" if im and not im.error else "",
                fmt_t(ms(tv, "read_flushed")) if tv and not tv.error else "n/a",
                "(none)",
                "",
            )


def phase_txn10k(ctx, vname, small, by):
    args = ctx.args
    arms = [a for a in small if a.error is None]
    rng = random.Random(555 + int(vname[1:]))
    batches = [[rand_row(rng) for _ in range(args.txn_rows)] for _ in range(args.txn_reps + 1)]
    log(f"  {vname}: {args.txn_reps}+1 x {args.txn_rows}-row transactions x {len(arms)} connections")

    def run(a, i):
        t0 = perf_ns()
        with a.conn:
            a.conn.executemany(OPS["INSERT"], batches[i])
        dt = perf_ns() - t0
        if a.key == "mv_def":
            t1 = perf_ns()
            a.conn.flush()
            if i >= 1:
                a.extra["txn10k_flush"].append(perf_ns() - t1)
        return dt

    interleave(arms, args.txn_reps, 1, "txn10k", run)
    nov, raw, tnov, tview = by.get("mv_nov"), by.get("raw"), by.get("t_nov"), by.get("t_view")
    for mode, key in (("immediate", "mv_imm"), ("deferred", "mv_def")):
        if not ctx.use_mv:
            continue
        a = by.get(key)
        if a is None:
            add_row(
                f"{args.txn_rows}-row INSERT txn vs no view",
                vname,
                mode,
                "ERROR (CREATE failed)",
                "",
                "",
                f"<= {TARGET['txn10k']}x",
                "NO",
            )
            continue
        mvc = arm_cell(a, nov, "txn10k")
        r_ = None if a.error or nov.error else ratio(a.med("txn10k"), nov.med("txn10k"))
        extra = ""
        if key == "mv_def" and a.extra.get("txn10k_flush") and not a.error:
            f = statistics.median(a.extra["txn10k_flush"])
            extra = f"; +flush {fmt_t(f)} -> {ratio(a.med('txn10k') + f, nov.med('txn10k')):.2f}x"
        rawc = arm_cell(a, raw, "txn10k", show_abs=False) + extra
        if mode == "immediate":
            tc = arm_cell(tview, tnov, "txn10k") if tview else ("refused" if ctx.use_turso else "n/a")
        else:
            tc = "n/a (no deferred mode)"
        target = TXN10K_V4 if vname == "V4" else TARGET["txn10k"]
        add_row(
            f"{args.txn_rows}-row INSERT txn vs no view",
            vname,
            mode,
            mvc,
            rawc,
            tc,
            f"<= {target}x",
            "NO" if a.error else met(r_, target),
        )


# --------------------------------------------------------------------------- main


def print_table(args, elapsed):
    cols = [
        ("measure", "measure"),
        ("view", "view"),
        ("mode", "mode"),
        ("matview", "matview ratio/time"),
        ("raw", "matview vs raw apsw / context"),
        ("turso", "turso ratio/time"),
        ("target", "target"),
        ("met", "met?"),
    ]
    try:
        if args.plain:
            raise ImportError
        from rich import box
        from rich.console import Console
        from rich.table import Table

        width = max(shutil.get_terminal_size((220, 40)).columns, 220)
        con = Console(width=width, highlight=False)
        tb = Table(box=box.SIMPLE_HEAVY, show_lines=False, title=f"matview core benchmark ({elapsed:.0f}s)")
        for _, h in cols:
            tb.add_column(h, overflow="fold")
        last = None
        for r in ROWS:
            if last is not None and r["view"] != last:
                tb.add_section()
            last = r["view"]
            style = "bold red" if r["met"].startswith("NO") else None
            tb.add_row(*[str(r[k]) for k, _ in cols], style=style)
        con.print(tb)
    except ImportError:
        widths = [max(len(h), *(len(str(r[k])) for r in ROWS)) if ROWS else len(h) for k, h in cols]
        line = " | ".join(h.ljust(w) for (k, h), w in zip(cols, widths))
        print(line)
        print("-+-".join("-" * w for w in widths))
        for r in ROWS:
            print(" | ".join(str(r[k]).ljust(w) for (k, _), w in zip(cols, widths)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="base table rows (default 100000)")
    ap.add_argument(
        "--big-rows", type=int, default=1_000_000, help="rows for the growth test (default 1000000; 0 = skip)"
    )
    ap.add_argument("--quick", action="store_true", help="skip the big-table growth test, fewer iterations")
    ap.add_argument(
        "--iters", type=int, default=None, help="single-row txns per op per connection (default 1000, quick 200)"
    )
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--views", default="V1,V2,V4")
    ap.add_argument("--create-reps", type=int, default=None, help="CREATE/CTAS repetitions (default 5, quick 3, min 2)")
    ap.add_argument("--scan-reps", type=int, default=None, help="full-scan repetitions (default 15, quick 7)")
    ap.add_argument("--point-reps", type=int, default=None, help="point lookups (default 2000, quick 500)")
    ap.add_argument("--pending", type=int, default=1000, help="pending writes before the deferred read")
    ap.add_argument("--pending-rounds", type=int, default=None, help="rounds (default 7, quick 3)")
    ap.add_argument("--txn-rows", type=int, default=10_000)
    ap.add_argument("--txn-reps", type=int, default=None, help="10k-row txn repetitions (default 7, quick 3)")
    ap.add_argument("--no-turso", action="store_true")
    ap.add_argument("--tmpdir", default=None, help="where to put the database files (default: system temp)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--json", default=None, help="also write raw medians to this JSON file")
    ap.add_argument("--plain", action="store_true", help="plain-text table instead of rich")
    args = ap.parse_args(argv)
    q = args.quick
    args.iters = args.iters or (200 if q else 1000)
    args.create_reps = max(2, args.create_reps or (3 if q else 5))  # rep 0 -> reads, last rep -> writes
    args.scan_reps = args.scan_reps or (7 if q else 15)
    args.point_reps = args.point_reps or (500 if q else 2000)
    args.pending_rounds = args.pending_rounds or (3 if q else 7)
    args.txn_reps = args.txn_reps or (3 if q else 7)
    views = [v.strip() for v in args.views.split(",") if v.strip()]

    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="matview-bench-", dir=args.tmpdir)
    ctx = Ctx(args, tmp)
    env = {
        "python": platform.python_version(),
        "apsw": apsw.apswversion(),
        "sqlite": apsw.sqlitelibversion(),
        "turso": None,
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
    }
    try:
        import importlib.metadata as md

        env["turso"] = md.version("pyturso")
    except Exception:
        pass
    log(f"env: {env}; tmp={tmp}")
    if MATVIEW_IMPORT_ERROR:
        log(f"matview NOT importable ({MATVIEW_IMPORT_ERROR}): running no-view/Turso parts only")
        PROBLEMS.append(f"matview not importable: {MATVIEW_IMPORT_ERROR}")
    if TURSO_IMPORT_ERROR and not args.no_turso:
        log(f"turso NOT importable ({TURSO_IMPORT_ERROR})")
    try:
        t0 = time.time()
        build_base(ctx.base, args.rows, seed=1)
        log(f"built base {args.rows} rows in {time.time() - t0:.1f}s")
        if ctx.do_big:
            t0 = time.time()
            build_base(ctx.big, args.big_rows, seed=2)
            log(f"built big base {args.big_rows} rows in {time.time() - t0:.1f}s")
        all_corr = {}
        for vname in views:
            select = VIEWS[vname]
            log(f"=== {vname}: {select}")
            paths, status = phase_create(ctx, vname, select)
            c0 = phase_reads(ctx, vname, select, paths, status)
            for k in list(paths):
                if k[1] == "read":
                    remove_db(paths[k])
            big_paths = make_big_views(ctx, vname, select, status) if ctx.do_big else {}
            c1, c2, c3 = phase_writes(ctx, vname, select, paths, status, big_paths)
            all_corr[vname] = (c0, c1, c2, c3, status)
        # correctness rows
        for vname, (c0, c1, c2, c3, status) in all_corr.items():

            def summary(prefix, c0=c0, c1=c1, c2=c2, c3=c3):
                parts = []
                for label, d in (("create", c0), ("writes", c1), ("10k+flush", c2), ("reopen", c3)):
                    for k, v in d.items():
                        if k.startswith(prefix):
                            parts.append((label, k, v))
                return parts

            def cell(prefix, refused_key, status=status):
                if prefix == "t_" and not ctx.use_turso:
                    return "n/a"
                if prefix == "mv_" and not ctx.use_mv:
                    return "n/a"
                if refused_key in status:
                    return "refused: " + status[refused_key]
                parts = summary(prefix)
                bad = [(lab, k, v) for lab, k, v in parts if v != "ok"]
                if not parts:
                    return "not checked"
                if not bad:
                    return f"ok ({len(parts)} checks)"
                kinds = sorted({v for _, _, v in bad})
                where = sorted({lab + ("@create" if k.endswith("@create") else "") for lab, k, _ in bad})
                return f"{'/'.join(kinds)} in {len(bad)}/{len(parts)} checks: " + ", ".join(where)

            mvc = cell("mv_", "imm")
            add_row(
                "view == SELECT re-run (bag, types)",
                vname,
                "both",
                mvc,
                "",
                cell("t_", "tview"),
                "ok",
                "yes" if mvc.startswith("ok") else ("NO" if ctx.use_mv else ""),
            )
        wr = ctx.results.get("wrapper")
        if wr:
            for op, rs in wr.items():
                rs = [r for r in rs if r]
                if rs:
                    add_row(
                        f"1-row {op}: matview.connect (no view) vs raw apsw",
                        ",".join(views),
                        "-",
                        " / ".join(f"{r:.2f}x" for r in rs),
                        "",
                        "",
                        "(info)",
                        "",
                    )
    finally:
        elapsed = time.time() - t_start
        env["loadavg_end"] = os.getloadavg()
        env["elapsed_s"] = elapsed
        print()
        print(
            f"matview core benchmark: rows={args.rows} big_rows={'skipped' if not ctx.do_big else args.big_rows} "
            f"iters={args.iters} warmup={args.warmup} | "
            f"python {env['python']} apsw {env['apsw']} sqlite {env['sqlite']} "
            f"pyturso {env['turso']} | cpus={env['cpus']} "
            f"load {env['loadavg_start'][0]:.2f}->{env['loadavg_end'][0]:.2f} | "
            f"{elapsed:.0f}s"
        )
        print(
            "Ratios are medians(with view)/medians(baseline) measured interleaved in one process. "
            "'no view' baseline = matview.connect on an identical DB without the view; "
            "Turso ratio = Turso view / Turso no view."
        )
        print_table(args, elapsed)
        if TURSO_NOTES:
            print("\nTurso notes (refusals / crashes / wrong results):")
            for n in dict.fromkeys(TURSO_NOTES):
                print("  - " + n)
        if PROBLEMS:
            print("\nmatview engine problems:")
            for n in PROBLEMS:
                print("  - " + n.rstrip().replace("\n", "\n    "))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(
                    {
                        "env": env,
                        "args": vars(args),
                        "rows": ROWS,
                        "results": ctx.results,
                        "problems": PROBLEMS,
                        "turso_notes": TURSO_NOTES,
                    },
                    f,
                    indent=1,
                    default=str,
                )
        if args.keep:
            print(f"(kept {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
