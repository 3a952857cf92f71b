"""``kgwise data …``: the benchmark data sets."""

from __future__ import annotations

from rich.table import Table

from kgwise.cli.apps import data_app
from kgwise.cli.common import DataOption, JsonOption, console, friendly_errors, write_json
from kgwise.config import data_dir
from kgwise.datasets import DATASETS, load, load_openbook_facts


@data_app.command("stats")
@friendly_errors
def stats(data: DataOption = None, json_out: JsonOption = None) -> None:
    """Load every data set split and print its question count (and OBQA's open-book facts)."""
    root = data_dir(data)
    table = Table(title=f"kgwise data sets in {root}")
    for col in ("data set", "split", "questions", "with gold", "choices"):
        table.add_column(col, justify="left" if col in ("data set", "split") else "right")
    report: dict[str, dict[str, int]] = {}
    for name, splits in DATASETS.items():
        report[name] = {}
        for split in splits:
            qs = load(name, split, root)
            report[name][split] = len(qs)
            n_choices = sorted({len(q.choices) for q in qs})
            table.add_row(name, split, f"{len(qs):,}", f"{sum(1 for q in qs if q.gold):,}",
                          "/".join(map(str, n_choices)) if n_choices != [0] else "open")
    facts = len(load_openbook_facts(root))
    report["obqa"]["openbook_facts"] = facts
    table.add_row("obqa", "open-book facts", f"{facts:,}", "", "")
    console.print(table)
    if json_out is not None:
        write_json(report, json_out)
