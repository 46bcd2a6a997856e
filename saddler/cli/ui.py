"""`saddler ui RUN [RUN ...] [--port P] [--host H]`: serve the run dashboard on this machine until Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import typer

from saddler.cli.common import fail, handle_errors


def register(app: typer.Typer) -> None:
    """Add `ui` to `app`."""

    @app.command()
    @handle_errors
    def ui(
        runs: list[Path] = typer.Argument(..., help="run folders (or their evodag.sqlite); two or more: side by side"),
        port: int = typer.Option(8765, "--port", min=0, max=65535, help="port to listen on (0: any free port)"),
        host: str = typer.Option("127.0.0.1", "--host", help="address to bind (default: this machine only)"),
    ) -> None:
        """Serve a local web page of the runs (graph, timeline, node and task pages, progress), following a
        running one; reads the EvoDAG read-only. Bound to 127.0.0.1 unless --host says otherwise."""
        from saddler.ui.api import RunSource
        from saddler.ui.server import LOCAL_HOST, make_server

        sources = [RunSource(Path(r)) for r in runs]
        for src in sources:
            if not src.db.is_file():
                fail(f"{src.path} has no evodag.sqlite: pass a run folder that has run (`saddler run DIR`)", 2)
        if host not in (LOCAL_HOST, "localhost", "::1"):
            typer.echo(
                f"warning: serving on {host}: anyone who can reach this address can read these runs "
                "(harness diffs, per-task outcomes, transcripts' paths)",
                err=True,
            )
        try:
            server = make_server(sources, host, port)
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port", 2)
        bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        typer.echo(f"ui: http://{shown}:{bound_port}/  (Ctrl-C stops it)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
