"""``kgwise uag calibrate`` (UAG on your own KG and labelled questions) and ``kgwise uag answer`` (the
calibrated answer set of a new question)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kgwise.cli.apps import app
from kgwise.cli.common import (
    ConfigOption,
    JsonOption,
    console,
    distinct_outputs,
    err_console,
    friendly_errors,
    listed,
    writable,
    write_json,
)
from kgwise.errors import ConfigError, DataError
from kgwise.kg.sources import GRAPH_SPEC_HELP

if TYPE_CHECKING:
    from collections.abc import Callable

    from kgwise.kg.grounding import Grounder
    from kgwise.types import Question

uag_app = typer.Typer(help="Calibrated answer sets (UAG) on your own KG.", no_args_is_help=True)
app.add_typer(uag_app, name="uag")

_LLM_HELP = ("LLM that writes Φ(P) from the retrieved paths: smollm2-135m, gemma3-270m, gguf:PATH, "
             "openai:MODEL.")
KgOption = Annotated[str, typer.Option("--kg", help="The KG: " + GRAPH_SPEC_HELP + ".")]
IndexOption = Annotated[Path | None, typer.Option(
    "--index", help="A label index of the KG (`kgwise kg index build`), for proposing topic entities over "
    "an endpoint (a graph file's names are read from the graph).")]


def propose_topics(questions: list[Question], grounder_of: Callable[[], Grounder]
                   ) -> tuple[list[Question], dict[str, list[str]]]:
    """``questions`` with the topic entities the grounder proposes (preferred labels) filled in where a
    question has none, and which were proposed (question id → labels)."""
    from kgwise.kg.grounding import propose_topic_entities

    out: list[Question] = []
    proposed: dict[str, list[str]] = {}
    grounder: Grounder | None = None
    for q in questions:
        if not q.topic_entities:
            grounder = grounder or grounder_of()
            q, links = propose_topic_entities(grounder, q)
            if links:
                proposed[q.id] = list(q.topic_entities)
        out.append(q)
    return out, proposed


def read_questions(path: Path) -> list[Question]:
    """One question per JSONL line: ``{"id", "text", "gold": [names], "topic_entities": [names]}``, or
    RoG KGQA data (:func:`kgwise.datasets.rog.load_rog`)."""
    from kgwise.files import read_jsonl
    from kgwise.kg.loaders.rog import is_rog_source
    from kgwise.types import Question

    if is_rog_source(path):
        from kgwise.datasets.rog import load_rog

        return load_rog(path)

    out: list[Question] = []
    for line, obj in read_jsonl(path, "questions file"):
        try:
            out.append(Question.from_dict(obj))
        except (TypeError, ValueError) as exc:
            raise DataError(f"not a question: {exc}", path, line) from exc
    return out


def read_generations(path: Path) -> dict[str, str]:
    """Recorded ``Φ(P)``: one ``{"id", "answer"}`` per JSONL line."""
    from kgwise.datasets._io import text_field
    from kgwise.files import read_jsonl

    return {text_field(o, "id", path, n): text_field(o, "answer", path, n)
            for n, o in read_jsonl(path, "generations file")}


@uag_app.command("calibrate")
@friendly_errors
def calibrate(
    kg: KgOption,
    questions: Annotated[Path, typer.Option(help="Labelled questions (JSONL: id, text, gold, "
                                            "topic_entities; or RoG KGQA data: .parquet shards or .jsonl).")],
    out: Annotated[Path, typer.Option(
        help="Calibration file to write (JSON), for `kgwise uag answer`.", callback=writable)],
    alpha: Annotated[float | None, typer.Option(
        help="Target miss rate α (no gold answer in the set) (default: the --config's, else 0.1).",
        show_default=False)] = None,
    delta: Annotated[float | None, typer.Option(
        help="LTT confidence parameter δ (default: the --config's, else 0.05).", show_default=False)] = None,
    llm: Annotated[str | None, typer.Option(help=_LLM_HELP)] = None,
    generations: Annotated[Path | None, typer.Option(
        help="Recorded Φ(P) instead of --llm (JSONL: id, answer).")] = None,
    tune_fraction: Annotated[float, typer.Option(help="Share of the questions that tunes the grid; the rest "
                                                 "calibrates.")] = 0.4,
    max_hops: Annotated[int, typer.Option(help="Longest relation path retrieved.")] = 2,
    direction: Annotated[str, typer.Option(help="Edges a hop may follow: out, in or both.")] = "out",
    seed: Annotated[int, typer.Option(min=0, help="Seed of the tuning/calibration split.")] = 0,
    work: Annotated[Path | None, typer.Option(
        help="Where question tables are cached (resumable, a folder per set of inputs); default under the "
             "kgwise cache.")] = None,
    index: IndexOption = None,
    config: ConfigOption = None,
    json_out: JsonOption = None,
) -> None:
    """Build UAG's tables for labelled QUESTIONS over KG, fit the grid, run Learn-then-Test, save the λ;
    grid steps, evaluator scores and the FWER procedure from the uag table of --config. A question
    without topic entities gets those the grounder proposes ([linking] table of --config)."""
    from kgwise.config import cache_dir
    from kgwise.conformal.calibrated import CalibratedUAG, TableSettings, calibrate_uag, labelled_questions
    from kgwise.conformal.evaluator import LLMGenerator
    from kgwise.conformal.provenance import graph_fingerprint
    from kgwise.conformal.retriever import RetrieverConfig
    from kgwise.conformal.tables import TABLES_VERSION, build_tables
    from kgwise.files import file_stamp, short_hash
    from kgwise.kg.sources import graph_stamp, open_graph
    from kgwise.settings import configured

    if (llm is None) == (generations is None):
        raise ConfigError("pass exactly one of --llm (live Φ(P)) and --generations (recorded Φ(P))")
    distinct_outputs({"--out": out, "--json": json_out}, {"--kg": kg, "--questions": questions,
                                                          "--generations": generations, "--config": config})
    cfg = configured("uag", config, alpha=alpha)
    if delta is not None:
        cfg = replace(cfg, ltt=replace(cfg.ltt, delta=delta))
    graph = open_graph(kg)
    from kgwise.cli.linking import make_grounder

    given, proposed = propose_topics(read_questions(questions),
                                     lambda: make_grounder(graph, index, config, embeddings=False))
    if proposed:
        err_console.print(f"topic entities proposed for {len(proposed)} questions that named none: "
                          f"{listed([f'{i}: {t}' for i, t in proposed.items()])}")
    qs = labelled_questions(given, str(questions))
    if len(qs) < len(given):
        kept = {id(q) for q in qs}
        left_out = [q.id for q in given if id(q) not in kept]
        err_console.print(f"[yellow]warning:[/yellow] {len(left_out)} of {len(given)} questions have no gold "
                          f"answers or no topic entities and are left out: {listed(left_out)}")
    unknown = [(q.id, t) for q in qs for t in q.topic_entities if graph.find(t) is None]
    if unknown:
        lost = len({qid for qid, _ in unknown})
        err_console.print(f"[yellow]warning:[/yellow] {len(unknown)} topic entities of {lost} questions are "
                          f"not in the KG ({listed([f'{i}: {t!r}' for i, t in unknown])}); those questions "
                          "retrieve from their other topic entities, or nothing (a miss)")
    settings = TableSettings(RetrieverConfig(max_hops=max_hops, direction=direction))  # type: ignore[arg-type]
    recorded = read_generations(generations) if generations is not None else None
    if recorded is not None:
        missing = [q.id for q in qs if q.id not in recorded]
        if missing:
            raise DataError(f"no recorded answer for {len(missing)} of the {len(qs)} questions: "
                            f"{listed(missing)}", generations)
        extra = set(recorded) - {q.id for q in qs}
        if extra:
            err_console.print(f"[yellow]warning:[/yellow] {len(extra)} answers in {generations} belong to no "
                              f"question of {questions}: {listed(sorted(extra))}")
    from kgwise.conformal.calibrated import reachability_advice
    from kgwise.conformal.ltt import min_calibration_questions

    n_cal = len(qs) - round(tune_fraction * len(qs))
    need = min_calibration_questions(cfg.alpha, cfg.ltt.delta)
    if n_cal < need:  # said before any table is built
        raise ConfigError(f"α={cfg.alpha:g}, δ={cfg.ltt.delta:g} needs at least {need} calibration "
                          f"questions; {len(qs)} questions less the tuning share {tune_fraction:g} leave "
                          f"{n_cal}: give more questions, a larger --alpha or --delta, or a smaller "
                          "--tune-fraction")
    err_console.print(f"α={cfg.alpha:g}, δ={cfg.ltt.delta:g} needs at least {need} calibration questions; "
                      f"there are {n_cal}")
    live = None
    if llm is not None:
        from kgwise.llm import get_llm

        live = LLMGenerator(get_llm(llm, cache=True))
    inputs = [graph_stamp(kg), *(file_stamp(p) for p in (questions, *([generations] if generations else [])))]
    key = short_hash({"inputs": inputs, "llm": llm, "max_hops": max_hops, "direction": direction,
                      "tables": TABLES_VERSION})
    tables = build_tables(graph, qs, recorded, settings.scorer(), settings.retriever,
                          (work or cache_dir() / "uag-calibrate") / key,
                          evaluator=settings.evaluator_config(), generator=live)
    reach = reachability_advice(float(tables.gold_retrievable().mean()), [cfg.alpha], settings.retriever)
    if reach:
        err_console.print(f"[yellow]warning:[/yellow] {reach}")
    uag, summary = calibrate_uag(tables, cfg, settings, tune_fraction=tune_fraction, seed=seed)
    summary["kg"], summary["questions_file"] = str(kg), str(questions)
    summary["questions_left_out"] = len(given) - len(qs)
    summary["topic_entities_proposed"] = proposed
    summary["generator"] = llm if llm is not None else f"recorded:{generations}"
    summary["made_with"] = {"kg": graph_fingerprint(graph), "generator": llm}
    if uag.abstains:
        write_json(summary, json_out)
        raise ConfigError(f"no λ could be certified at α={cfg.alpha}, δ={cfg.ltt.delta} on "
                          f"{summary['calibration']} "
                          "calibration questions: try a larger α, more questions, or a deeper retrieval")
    CalibratedUAG(uag, settings, summary).save(out)
    write_json(summary, json_out)
    err_console.print(f"calibrated UAG written to {out}")


@uag_app.command("answer")
@friendly_errors
def answer(
    question: Annotated[str, typer.Argument(help="The question text.")],
    kg: KgOption,
    uag: Annotated[Path, typer.Option("--uag", help="A file written by `kgwise uag calibrate`.")],
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", help="A topic entity of the question, as named in the KG; repeat for several. Default: "
        "those the grounder proposes from the question.")] = None,
    index: IndexOption = None,
    config: ConfigOption = None,
    llm: Annotated[str | None, typer.Option(help=_LLM_HELP + " Default: the one calibrated with.")] = None,
    allow_mismatch: Annotated[bool, typer.Option(
        "--allow-mismatch", help="Answer even when the KG or the LLM differs from the calibration's (the set "
        "then carries no guarantee).")] = False,
    json_out: JsonOption = None,
) -> None:
    """The calibrated answer set of QUESTION: every KG answer UAG keeps at the calibrated α. The guarantee
    assumes Φ(P) comes from the generator the calibration used."""
    from kgwise.app.answer_sets import UAGApp

    uag_app = UAGApp(uag, kg, llm, allow_mismatch)
    for line in uag_app.mismatch:
        err_console.print(f"[yellow]warning:[/yellow] {line}")
    spec, same = uag_app.llm_spec, uag_app.same_generator
    if not same and not uag_app.mismatch:
        err_console.print(f"[yellow]warning:[/yellow] calibrated with {uag_app.calibrated_generator}, "
                          f"answering with {spec}: the guarantee assumes the same generator")
    from kgwise.cli.linking import make_grounder
    from kgwise.kg.linking import did_you_mean
    from kgwise.types import Question

    distinct_outputs({"--json": json_out}, {"--uag": uag, "--kg": kg})
    graph = uag_app.kg
    q = Question(id="", text=question, topic_entities=tuple(topic or ()))
    proposed: list[dict[str, object]] = []
    if not q.topic_entities:
        grounder = make_grounder(graph, index, config, embeddings=False)
        (q,), _ = propose_topics([q], lambda: grounder)
        if not q.topic_entities:
            raise ConfigError("no topic entity found in the question: name one with --topic"
                              + did_you_mean(question, grounder))
        links = grounder.topic_entities(question)
        proposed = [link.to_dict() | {"label": graph.label(link.node)} for link in links]
        console.print("[bold]topic entities[/bold] (proposed): " + ", ".join(
            f"{p['label']} ({p['method']} {p['score']:.2f} for {p['mention']!r})" for p in proposed))
    result = uag_app.answer(question, q.topic_entities)
    s = result.answer_set
    for name in s.unknown_topic_entities:
        err_console.print(f"[yellow]warning:[/yellow] the topic entity {name!r} is not in the KG"
                          f"{did_you_mean(name, graph)}; retrieving from the others")
    bound = f"miss rate ≤ {s.alpha:g} with probability ≥ {1 - s.delta:g}"
    claim = ("[bold red]no guarantee[/bold red]: another pipeline than the calibration's" if result.mismatch
             else bound if same else f"{bound} only if {spec} answers like the calibration's generator")
    console.print(f"[bold]{len(s.answers)} answer(s)[/bold] ({claim}): " + (", ".join(s.answers) or "—"))
    write_json(result.to_dict() | {"topic_entities_proposed": proposed}, json_out)
