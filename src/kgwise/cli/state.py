"""``kgwise state …``: ``repair`` checks a state folder's journal (:func:`kgwise.app.state.repair`);
``migrate`` moves a pipeline's state between its folder and PostgreSQL, or upgrades a database's schema
(:mod:`kgwise.app.state_migrate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from kgwise.cli.apps import app
from kgwise.cli.common import JsonOption, console, friendly_errors, refuse_overwrite, save_json, write_json
from kgwise.errors import ConfigError

__all__ = ["state_app"]

state_app = typer.Typer(help="Repair, move or upgrade a pipeline's state (folder ↔ PostgreSQL).",
                        no_args_is_help=True)
app.add_typer(state_app, name="state")


def _is_url(where: str) -> bool:
    return where.startswith(("postgresql://", "postgres://"))


@state_app.command("migrate")
@friendly_errors
def migrate(
    to: Annotated[str, typer.Option("--to", help="Target: a state folder, or a postgresql:// URL.")],
    source: Annotated[str | None, typer.Option(
        "--from", help="Source: a state folder, or a postgresql:// URL; without it, --to URL's schema is "
        "upgraded to this kgwise's version.", show_default=False)] = None,
    config: Annotated[Path, typer.Option("--config", help="The pipeline's kgwise.toml.")
                      ] = Path("kgwise.toml"),
    timeout_s: Annotated[float, typer.Option("--timeout-s", help="Database connect timeout.")] = 10.0,
    json_out: JsonOption = None,
) -> None:
    """Folder → PostgreSQL (``--from DIR --to URL``), back (``--from URL --to DIR``), or a schema upgrade
    (``--to URL``). Stop the replicas first: the target must hold no state."""
    from kgwise.app import PipelineConfig
    from kgwise.app.state_migrate import database_to_folder, folder_to_database, upgrade_database

    if source is None:
        if not _is_url(to):
            raise ConfigError("--to without --from upgrades a database: give a postgresql:// URL")
        found, now = upgrade_database(to, timeout_s)
        console.print(f"schema version {found} → {now}" if found != now
                      else f"schema already at version {now}")
        return
    if _is_url(source) == _is_url(to):
        raise ConfigError("--from and --to: one a state folder, the other a postgresql:// URL")
    cfg = PipelineConfig.load(config)
    report = (database_to_folder(source, Path(to), cfg, timeout_s) if _is_url(source)
              else folder_to_database(Path(source), to, cfg, timeout_s))
    console.print(f"moved {report.source} → {report.target}: spent {report.spent:g}, {report.questions} "
                  f"questions seen, {report.pending} awaiting feedback, {report.settled} settled, files: "
                  f"{', '.join(report.files) or 'none'}")
    if json_out is not None:
        write_json(report.to_dict(), json_out)


@state_app.command("repair")
@friendly_errors
def repair_command(
    state: Annotated[Path, typer.Option("--state", help="The state directory to check and repair.",
                                        exists=True, file_okay=False)],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what a repair keeps and drops.")
                       ] = False,
    json_out: JsonOption = None,
) -> None:
    """Check a pipeline's state directory: journal lines kept, torn or corrupt lines dropped (set aside in
    set-aside/, never deleted), the snapshot and the spend mark; without --dry-run, repair it."""
    from kgwise.app.state import repair

    refuse_overwrite({"--json": json_out}, {}, {"--state": state})
    report = repair(state, dry_run)
    verb = "would keep" if dry_run else "kept"
    for name, n in report.events_kept.items():
        console.print(f"{escape(name)}: {verb} {n} event{'' if n == 1 else 's'}")
    for line in report.dropped:
        verb = "would drop" if dry_run else "dropped"
        console.print(f"[yellow]{verb} (set aside): {escape(line)}[/yellow]")
    console.print(f"snapshot: {escape(report.snapshot)}; spend mark: {report.spend_mark:.6g}")
    if not report.changed:
        console.print("nothing to repair")
    elif dry_run:
        console.print(f"run `kgwise state repair --state {escape(str(state))}` to repair it")
    else:
        console.print(f"repaired; what was dropped is kept in {escape(str(report.set_aside_in))}")
    save_json(report.to_dict(), json_out)
