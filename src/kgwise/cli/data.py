"""``kgwise eval data …``: the benchmark data sets, and converting them into kgwise's own file formats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from kgwise.cli.apps import data_app
from kgwise.cli.common import (
    DataOption,
    JsonOption,
    console,
    distinct_outputs,
    friendly_errors,
    writable,
    write_json,
)
from kgwise.config import data_dir
from kgwise.datasets import DATASETS, load, load_openbook_facts
from kgwise.errors import ConfigError, KgwiseError


@data_app.command("stats")
@friendly_errors
def stats(data: DataOption = None, json_out: JsonOption = None) -> None:
    """Load every data set split and print its question count (and OBQA's open-book facts); a split that
    cannot be read is listed with the reason, and the others are still counted."""
    root = data_dir(data)
    table = Table(title=f"kgwise data sets in {root}")
    for col in ("data set", "split", "questions", "with gold", "choices"):
        table.add_column(col, justify="left" if col in ("data set", "split") else "right")
    report: dict[str, dict[str, int | str]] = {}
    missing = 0
    for name, splits in DATASETS.items():
        report[name] = {}
        for split in splits:
            try:
                qs = load(name, split, root)
            except KgwiseError as exc:
                missing += 1
                report[name][split] = f"missing: {exc}"
                table.add_row(name, split, "[yellow]missing[/yellow]", "", str(exc)[:60])
                continue
            report[name][split] = len(qs)
            n_choices = sorted({len(q.choices) for q in qs})
            table.add_row(name, split, f"{len(qs):,}", f"{sum(1 for q in qs if q.gold):,}",
                          "/".join(map(str, n_choices)) if n_choices != [0] else "open")
    try:
        facts = len(load_openbook_facts(root))
        report["obqa"]["openbook_facts"] = facts
        table.add_row("obqa", "open-book facts", f"{facts:,}", "", "")
    except KgwiseError as exc:
        missing += 1
        report["obqa"]["openbook_facts"] = f"missing: {exc}"
    total = sum(len(splits) for splits in DATASETS.values()) + 1
    if missing == total:
        raise ConfigError(f"no benchmark data set found in {root} (is it the shared data directory?)")
    console.print(table)
    if missing:
        console.print(f"[yellow]{missing} of the splits cannot be read here (reasons above)[/yellow]")
    if json_out is not None:
        write_json(report, json_out)


@data_app.command("export")
@friendly_errors
def export(
    dataset: Annotated[str, typer.Option(help=f"Data set: {', '.join(DATASETS)}.")],
    split: Annotated[str, typer.Option(help="Its split (e.g. test, ihdev).")] = "test",
    questions: Annotated[Path | None, typer.Option(
        help="Write the split as a questions file (JSONL, kgwise's format); with --generations or "
             "--candidates, the questions those cover, in `eval uag`'s order.", callback=writable)] = None,
    log: Annotated[Path | None, typer.Option(
        help="Write the recorded outcomes as a graded log (JSONL; webqsp test: the recorded systems of "
             "`eval route`).", callback=writable)] = None,
    generations: Annotated[Path | None, typer.Option(
        help="Write RoG's recorded answers (webqsp test; JSONL: id, answer), for `eval uag --generations`.",
        callback=writable)] = None,
    candidates: Annotated[Path | None, typer.Option(
        help="Write the ReaRev GNN's scored candidates (webqsp test; JSONL: id, candidates, gold), for "
             "`eval uag --candidates`.", callback=writable)] = None,
    data: DataOption = None,
) -> None:
    """Convert a benchmark into kgwise's own file formats, so the benchmarks and a user's data go through
    one path (`--questions FILE`, `--log FILE` of the other commands)."""
    outputs = {"--questions": questions, "--log": log, "--generations": generations,
               "--candidates": candidates}
    if all(v is None for v in outputs.values()):
        raise ConfigError("nothing to write: give --questions, --log, --generations and/or --candidates FILE")
    distinct_outputs(outputs, {})
    root = data_dir(data)
    if generations is not None or candidates is not None:
        if (dataset, split) != ("webqsp", "test"):
            raise ConfigError(f"recorded generations and candidates exist for webqsp/test only, not "
                              f"{dataset}/{split}")
        from kgwise.datasets.user import write_candidates, write_generations, write_questions
        from kgwise.eval.uag.experiment import webqsp_uag_files

        qs, gens, cands = webqsp_uag_files(root)
        if questions is not None:
            write_questions(questions, qs)
            console.print(f"{len(qs):,} questions of {dataset}/{split} (those with a RoG answer and ReaRev "
                          f"candidates, in eval uag's order) → {questions}")
        if generations is not None:
            console.print(f"{write_generations(generations, gens):,} RoG answers → {generations}")
        if candidates is not None:
            console.print(f"{write_candidates(candidates, cands):,} ReaRev candidate lists → {candidates}")
    elif questions is not None:
        from kgwise.datasets.user import write_questions

        n = write_questions(questions, load(dataset, split, root))
        console.print(f"{n:,} questions of {dataset}/{split} → {questions}")
    if log is not None:
        if (dataset, split) != ("webqsp", "test"):
            raise ConfigError(f"recorded outcomes exist for webqsp/test only, not {dataset}/{split}")
        from kgwise.datasets.user import write_graded_log
        from kgwise.eval.route.export import webqsp_graded_log

        graded, arms, _ = webqsp_graded_log(root)
        n = write_graded_log(log, graded)
        console.print(f"{n:,} graded questions × {len(graded.arms)} arms → {log}")
        console.print("arms (for --arm NAME:CLUSTER:ACCURACY): "
                      + " ".join(f"{a}:{c}:{acc!r}" for a, c, acc in arms))
