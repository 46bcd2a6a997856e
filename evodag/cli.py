"""`evo-dag`: read-only queries over a run's EvoDAG for people and optimizer sessions.

The database is `--db PATH`, else `$EVODAG_DB`, else `evodag.sqlite` in `--run DIR` (default: the current
directory). Every command prints plain text, or a stable JSON document with `--json`. Missing database,
unknown node/edge/task: one line on stderr, exit code 2; a damaged file or value anywhere in the store (named by
table, row and column, found when the file is opened): one line, exit code 1. Heavy imports (networkx) happen only
in the commands that need them so `evo-dag summary` starts fast.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from evodag import render
from evodag.errors import EvoDAGError

if TYPE_CHECKING:
    from evodag.store import EvoDAG

DB_FILE = "evodag.sqlite"
T = TypeVar("T")

app = typer.Typer(
    name="evo-dag",
    help="Query an EvoDAG (nodes, edges, rollouts, lessons) read-only. --json on every command.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help text (also for agents reading it through a pipe)
)

DbOpt = Annotated[
    Path | None, typer.Option("--db", help="EvoDAG SQLite file (else $EVODAG_DB, else RUN/evodag.sqlite)")
]
RunOpt = Annotated[Path | None, typer.Option("--run", help="run folder holding evodag.sqlite (default: cwd)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print a stable JSON document")]
RunIdOpt = Annotated[int | None, typer.Option("--run-id", help="run id inside the DB (default: the latest)")]


def resolve_db(db: Path | None, run: Path | None) -> Path:
    """`--db`, else `$EVODAG_DB`, else `<--run or cwd>/evodag.sqlite`."""
    if db is not None:
        return db
    env = os.environ.get("EVODAG_DB")
    if env:
        return Path(env)
    return (run if run is not None else Path.cwd()) / DB_FILE


def _read(db: Path | None, run: Path | None, build: Callable[[EvoDAG], T]) -> T:
    """Run `build` on the read-only store; store errors become one stderr line and an exit code
    (2 for a missing DB or unknown id, 1 for an SQLite failure)."""
    from evodag.store import EvoDAG

    path = resolve_db(db, run)
    try:
        with EvoDAG(path, readonly=True) as store:
            try:
                return build(store)
            except (ValueError, TypeError, KeyError, AttributeError):
                store.verify_rows()  # a damaged value read by raw SQL: name it (raises) instead of a traceback
                raise  # the data is sound: a genuine bug keeps its traceback
    except EvoDAGError as exc:
        typer.echo(f"evo-dag: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except sqlite3.DatabaseError as exc:
        typer.echo(f"evo-dag: cannot read {path}: {exc}", err=True)
        raise typer.Exit(1) from None


def _show(
    db: Path | None,
    run: Path | None,
    as_json: bool,
    build: Callable[[EvoDAG], dict[str, Any]],
    text: Callable[[dict[str, Any]], str],
) -> None:
    def build_text(store: EvoDAG) -> str:  # rendered inside `_read`: a damaged value may fail only here
        doc = build(store)
        return render.to_json(doc) if as_json else text(doc)

    typer.echo(_read(db, run, build_text))


@app.command()
def summary(db: DbOpt = None, run: RunOpt = None, run_id: RunIdOpt = None, as_json: JsonOpt = False) -> None:
    """Run, node counts by status, rollouts/sessions and cost, baseline, best, current iteration, decisions."""
    _show(db, run, as_json, lambda s: s.summary(run_id), render.summary_text)


@app.command()
def history(
    last: Annotated[int | None, typer.Option("--last", min=1, help="only the last N iterations")] = None,
    recent: Annotated[
        int | None,
        typer.Option("--recent", min=1, help="the last N iterations, texts cut, and a summary of the earlier ones"),
    ] = None,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="with --recent: this task's registry, bounded (repeatable)")
    ] = None,
    db: DbOpt = None,
    run: RunOpt = None,
    run_id: RunIdOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The run's iterations in order: batch, parent -> candidate, decision, batch scores, dev, intent, reason.
    `--recent N` is the bounded form sessions read: the same size at any length of the run."""
    from evodag.history import history as build_history
    from evodag.history import recent_history

    if task and recent is None:
        typer.echo(
            "evo-dag: --task goes with --recent N (the bounded history); for one task in full: scenario", err=True
        )
        raise typer.Exit(2)
    if recent is not None:
        _show(db, run, as_json, lambda s: recent_history(s, run_id, recent, task), render.history_text)
        return
    _show(db, run, as_json, lambda s: build_history(s, run_id, last), render.history_text)


@app.command()
def node(node_id: int, db: DbOpt = None, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """One node: scores, hypothesis, incoming edge, children, rollouts per split, lessons."""
    from evodag import queries

    _show(db, run, as_json, lambda s: queries.node_detail(s, node_id), render.node_text)


@app.command()
def edge(
    parent: Annotated[int, typer.Argument(metavar="ID", help="an edge id (`edge 15`); with CHILD, the parent node")],
    child: Annotated[int | None, typer.Argument(metavar="CHILD", help="the child node of the parent ID")] = None,
    db: DbOpt = None,
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One edge by its id (`evo-dag edge 15`) or as PARENT CHILD: diff text and per-task fixed / regressed / still
    failing / still passing."""
    from evodag import queries

    def detail(s: EvoDAG) -> dict[str, Any]:
        return queries.edge_detail(s, parent, child) if child is not None else queries.edge_by_id(s, parent)

    _show(db, run, as_json, detail, render.edge_text)


@app.command()
def scenario(
    task: str, db: DbOpt = None, run: RunOpt = None, run_id: RunIdOpt = None, as_json: JsonOpt = False
) -> None:
    """One task's registry: outcomes per node, lessons, root causes, failure signatures, every attempt on it
    (outcome and reason) and the files it is sensitive to."""
    _show(db, run, as_json, lambda s: s.scenario(task, run_id), render.scenario_text)


@app.command()
def lessons(
    node_id: Annotated[int | None, typer.Option("--node", help="lessons on this node")] = None,
    category: Annotated[str | None, typer.Option("--category", help="fixed|regressed|still_failing|...")] = None,
    attribution: Annotated[str | None, typer.Option("--attribution", help="true_fix|true_regression|...")] = None,
    task: Annotated[str | None, typer.Option("--task", help="lessons about this task")] = None,
    edge_id: Annotated[int | None, typer.Option("--edge", help="lessons on this edge id")] = None,
    last: Annotated[int | None, typer.Option("--last", min=1, help="only the last N of them")] = None,
    db: DbOpt = None,
    run: RunOpt = None,
    run_id: RunIdOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Lessons filtered by node, edge, category, attribution and task (all when no filter); `--last N` keeps the
    latest N and says how many matched."""
    from evodag.codec import as_dict

    def build(s: EvoDAG) -> dict[str, Any]:
        from evodag.codec import check_choice
        from evodag.models import ATTRIBUTIONS, LESSON_CATEGORIES

        if category is not None:
            check_choice("lesson category", category, LESSON_CATEGORIES)
        if attribution is not None:
            check_choice("attribution", attribution, ATTRIBUTIONS)
        if node_id is not None:
            s.get_node(node_id)
        found = s.lessons(run_id, node_id, edge_id, category, attribution, task)
        if last is None:
            return {"lessons": [as_dict(les) for les in found]}
        return {"lessons": [as_dict(les) for les in found[-last:]], "total": len(found)}

    _show(db, run, as_json, build, render.lessons_text)


@app.command()
def lineage(node_id: int, db: DbOpt = None, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """The path from the root to NODE_ID, with the kind of edge behind each step."""
    from evodag import queries

    _show(db, run, as_json, lambda s: queries.lineage_doc(s, node_id), render.lineage_text)


@app.command()
def best(db: DbOpt = None, run: RunOpt = None, run_id: RunIdOpt = None, as_json: JsonOpt = False) -> None:
    """The run's best node, as the optimizer recorded it by its ranking policy, and its path from the root."""
    from evodag import queries

    def build(s: EvoDAG) -> dict[str, Any]:
        top = s.best_node(run_id)
        path = [] if top is None else [queries.brief(n) for n in s.lineage(top.id)]
        return {"best": queries.brief(top), "path": path}

    _show(db, run, as_json, build, render.best_text)


@app.command()
def batch(db: DbOpt = None, run: RunOpt = None, run_id: RunIdOpt = None, as_json: JsonOpt = False) -> None:
    """The current iteration's mini-batch with each task's status on the parent and the candidate."""
    _show(db, run, as_json, lambda s: s.batch(run_id), render.batch_text)


@app.command()
def diff(a: int, b: int, db: DbOpt = None, run: RunOpt = None, as_json: JsonOpt = False) -> None:
    """Diffs along A -> B if A is an ancestor of B; otherwise both lineages' diffs from their common ancestor."""
    _show(db, run, as_json, lambda s: s.diff_path(a, b), render.diff_text)


@app.command()
def graph(db: DbOpt = None, run: RunOpt = None, run_id: RunIdOpt = None, as_json: JsonOpt = False) -> None:
    """The DAG as the dashboard draws it: nodes (status, phase, dev), edges by kind, the best and its lineage
    (test scores only once the run has finished)."""
    from evodag import dashboard

    _show(db, run, as_json, lambda s: dashboard.graph(s, run_id), render.graph_text)


@app.command()
def progress(db: DbOpt = None, run: RunOpt = None, run_id: RunIdOpt = None, as_json: JsonOpt = False) -> None:
    """Per finished iteration: the best node the run had recorded, its dev, search rollouts and cost so far."""
    from evodag import dashboard

    _show(db, run, as_json, lambda s: dashboard.progress(s, run_id), render.progress_text)


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="one SELECT (or WITH ... SELECT) statement")],
    param: Annotated[list[str] | None, typer.Option("--param", help="NAME=VALUE for :NAME in SQL (repeatable)")] = None,
    max_rows: Annotated[int, typer.Option("--max-rows", min=1, help="print at most this many rows")] = 1000,
    db: DbOpt = None,
    run: RunOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ad-hoc read-only SQL over the tables (nodes, edges, rollouts, lessons, ...); anything but a read is refused."""
    from evodag.adhoc import query_text, run_query

    params: dict[str, str] = {}
    for item in param or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            typer.echo(f"evo-dag: --param takes NAME=VALUE, got {item!r}", err=True)
            raise typer.Exit(2)
        params[name] = value
    _show(db, run, as_json, lambda s: run_query(s.conn, sql, params, max_rows), query_text)


@app.command("export")
def export_cmd(
    fmt: Annotated[str, typer.Option("--format", help="json | graphml | dot | mermaid")] = "json",
    out: Annotated[Path | None, typer.Option("--out", help="write to FILE instead of stdout")] = None,
    db: DbOpt = None,
    run: RunOpt = None,
    run_id: RunIdOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The whole DAG as json, graphml, dot or mermaid (stdout, or --out FILE)."""
    from evodag.export import export

    content, n_nodes, n_edges = _read(db, run, lambda s: export(s, fmt, run_id))
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(content, encoding="utf-8")
        except OSError as exc:  # full disk, no permission, read-only file system: one line, not a traceback
            typer.echo(f"evo-dag: cannot write {out}: {exc.strerror or exc}", err=True)
            raise typer.Exit(1) from None
        doc: dict[str, Any] = {"format": fmt, "out": str(out), "nodes": n_nodes, "edges": n_edges}
        typer.echo(render.to_json(doc) if as_json else f"wrote {fmt} ({n_nodes} nodes, {n_edges} edges) to {out}")
    elif as_json:
        typer.echo(render.to_json({"format": fmt, "content": content, "nodes": n_nodes, "edges": n_edges}))
    else:
        typer.echo(content, nl=False)


if __name__ == "__main__":  # pragma: no cover
    app()
