"""The pipeline from the shell — ``kgwise init``, ``kgwise ask --config``, ``kgwise feedback``, ``kgwise
status``, ``kgwise fit`` — each a thin call of :class:`kgwise.app.Pipeline`."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from kgwise.cli.apps import app
from kgwise.cli.common import (
    JsonOption,
    console,
    err_console,
    friendly_errors,
    refuse_overwrite,
    save_json,
    say,
    writable,
)
from kgwise.errors import ConfigError, KgwiseError

if TYPE_CHECKING:
    from kgwise.app.fit import FitReport
    from kgwise.app.pipeline import FeedbackResult, PipelineResult, PipelineStatus

__all__ = ["ask_pipeline", "parse_arm", "print_answer", "print_feedback", "print_fit", "print_status"]

SET_SHOWN = 20
"""Members of an answer set that ``ask`` prints (an open question's may hold hundreds)."""
SUPPORT_SHOWN = 3
"""Supporting KG paths ``ask`` prints (a few lines; ``--json`` has them all)."""

PipelineConfigOption = Annotated[Path, typer.Option(
    "--config", help="The pipeline's kgwise.toml (`kgwise init` writes one).")]
StateOption = Annotated[Path | None, typer.Option(
    "--state", help="State directory (default: .kgwise-state/ beside the config).", show_default=False)]


def parse_arm(spec: str) -> tuple[str, str, str, float | None]:
    """``NAME=KIND:SPEC[:PRICE]`` → ``(name, kind, spec, price)``; the spec may hold ``:``
    (``openai:gpt-4o-mini``), so a price is the last part only when it is a number."""
    name, sep, rest = spec.partition("=")
    kind, sep2, target = rest.partition(":")
    if not sep or not sep2 or not name.strip() or not target.strip():
        raise ConfigError(f"--arm {spec!r}: expected NAME=KIND:SPEC[:PRICE], e.g. small=llm:smollm2-135m")
    price: float | None = None
    head, colon, tail = target.rpartition(":")
    if colon and head:
        try:
            price = float(tail)
            target = head
        except ValueError:
            price = None
    return name.strip(), kind.strip(), target.strip(), price


@app.command("init")
@friendly_errors
def init(
    kg: Annotated[str, typer.Option("--kg", help="Graph file (.npz, .tsv, .nt, RoG data) or sparql:URL.")],
    arm: Annotated[list[str], typer.Option(
        "--arm", help="NAME=KIND:SPEC[:PRICE]: kind kgm (SPEC: model file), llm or inject (SPEC: an LLM "
        "spec); PRICE per call in the budget's unit; NAME=external:PRICE for a model you run yourself "
        "(`kgwise route`); repeatable.")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the config.", callback=writable)] = Path(
        "kgwise.toml"),
    budget_usd: Annotated[float | None, typer.Option("--budget-usd", min=0.0)] = None,
    budget_calls: Annotated[int | None, typer.Option("--budget-calls", min=1)] = None,
    alpha: Annotated[float | None, typer.Option("--alpha", help="Error rate of the answer sets, in (0, 1) "
                                                  "(default: [answer_sets] alpha's).", show_default=False)
                     ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented starter kgwise.toml, checked as `ask` will read it (files exist, models known,
    α in (0, 1)) before it is written."""
    from kgwise.app.config import PipelineConfig, starter_toml
    from kgwise.files import atomic_path

    if out.exists() and not force:
        raise ConfigError(f"{out} exists; pass --force to overwrite it (its state directory keeps its spend)")
    arms = [parse_arm(a) for a in arm]
    # the config reads its paths relative to its own folder: write the given (cwd-relative) ones so
    arms = [(n, k, _beside(out, s) if k == "kgm" else s, p) for n, k, s, p in arms]
    text = starter_toml(kg if kg.startswith("sparql:") else _beside(out, kg), arms, budget_usd, budget_calls,
                        alpha)
    with atomic_path(out) as tmp:  # replaces `out` only if the check passes
        tmp.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        try:
            PipelineConfig.load(tmp)
        except KgwiseError as exc:
            raise ConfigError(f"not written: {str(exc).replace(str(tmp), str(out))}") from exc
    err_console.print(f"wrote {out}. Next: `kgwise fit --config {out} --questions dev.jsonl` on labelled "
                      f"questions (router and answer sets), then `kgwise ask \"…\" --config {out}`")


def _beside(config: Path, path: str) -> str:
    """``path`` (as given, relative to the working directory) relative to ``config``'s folder."""
    return os.path.relpath(Path(path).resolve(), config.resolve().parent)


def _guard(json_out: Path | None, config: Path, state: Path | None, **inputs: Any) -> None:
    """Refuse a ``--json`` file that is the config, another input, or inside the state directory."""
    from kgwise.app.pipeline import default_state_dir

    refuse_overwrite({"--json": json_out}, {"--config": config, **inputs},
                     {"--state": state if state is not None else default_state_dir(config)})


def ask_pipeline(question: str, choices: str | None, config: Path, state: Path | None,
                 json_out: Path | None) -> None:
    """``kgwise ask --config``: one question through the pipeline; print the answer or the JSON."""
    from kgwise.app import Pipeline

    opts = choices.split("|") if choices is not None else None
    _guard(json_out, config, state)
    with Pipeline.from_config(config, state) as pipe:
        result = pipe.answer(question, opts)
    print_answer(result)
    save_json(result.to_dict(), json_out)


def ask_file(questions: Path, out: Path, config: Path, state: Path | None, json_out: Path | None) -> None:
    """``kgwise ask --questions FILE --out FILE --config``: every question through the pipeline, models
    loaded once; a one-line summary (and the refused questions) for a person, the report with --json."""
    from kgwise.app import Pipeline
    from kgwise.app.batch import answer_file

    _guard(json_out, config, state, **{"--questions": questions})
    _guard(out, config, state, **{"--questions": questions, "--json": json_out})
    with Pipeline.from_config(config, state) as pipe:
        report = answer_file(pipe, questions, out, echo=say)
    ratio = report.overhead_ratio
    console.print(f"{report.answered} answered now, {report.resumed} already in {out}, "
                  f"{len(report.refused)} refused, of {report.questions}; paid {report.cost:.6g} "
                  f"{report.unit}; {report.wall_s:.1f} s"
                  + (f" ({ratio:.2f} × the {report.model_s:.1f} s of model calls)" if ratio else ""))
    for qid, why in report.refused.items():
        console.print(f"[yellow]refused {escape(qid)}: {escape(why)}[/yellow]")
    save_json({**dataclasses.asdict(report), "overhead_ratio": ratio}, json_out)


def print_answer(result: PipelineResult) -> None:
    """``kgwise ask --config`` for a person: answer, arm and cost, the set (its first members), notes, the
    knowledge and the decision id."""
    console.print(f"[bold]answer:[/bold] {escape(result.answer)}"
                  + (f" ({result.label})" if result.label else ""))
    if result.answer_entities:
        console.print(f"KG entities: {escape(', '.join(result.answer_entities))}")
    console.print(f"arm: {result.arm}   cost: {result.cost:.6g} {result.unit}   remaining budget: "
                  f"{result.remaining_budget:.6g}")
    if result.answer_set is not None:
        s = result.answer_set
        more = len(s.texts) - SET_SHOWN
        holds = "holds" if s.guarantee else "does NOT hold"
        console.print(f"set of {len(s.texts)} (α = {s.alpha:g}, guarantee {holds}): "
                      f"{escape(', '.join(s.texts[:SET_SHOWN]))}"
                      + (f" … and {more} more (all with --json)" if more > 0 else ""))
        console.print(f"  [dim]{escape(s.statement)}[/dim]")
    if result.abstention is not None:
        how = "abstained" if result.abstained else "answered"
        console.print(f"{how}: {escape(result.abstention.promise)}")
    for note in result.notes:
        console.print(f"note: {escape(note)}")
    if result.knowledge.text:
        console.print(f"knowledge ({result.knowledge.combo}, {len(result.knowledge.triples)} triples):")
        console.print(result.knowledge.text, markup=False)
    support = result.knowledge.support
    if support:
        console.print(f"support ({len(support)} KG path(s) to the answer):")
        for chain in support[:SUPPORT_SHOWN]:
            hops = " ; ".join(f"{t.head} -[{t.relation}]- {t.tail}" for t in chain)
            console.print(f"  {hops}", markup=False)
        if len(support) > SUPPORT_SHOWN:
            console.print(f"  … and {len(support) - SUPPORT_SHOWN} more (all with --json)")
    console.print(f"decision: {result.decision}  (feed back with `kgwise feedback {result.decision} "
                  "--correct|--wrong|--gold X`)")


@app.command("feedback")
@friendly_errors
def feedback(
    decision: Annotated[str, typer.Argument(help="The decision id `kgwise ask --config` printed.")],
    correct: Annotated[bool | None, typer.Option("--correct/--wrong", help="Was the answer right?",
                                                  show_default=False)] = None,
    gold: Annotated[str | None, typer.Option("--gold", help="The true choice (label or text) or answer.")
                    ] = None,
    config: PipelineConfigOption = Path("kgwise.toml"),
    state: StateOption = None,
    json_out: JsonOption = None,
) -> None:
    """Teach the pipeline's router the outcome of a decision (once per decision)."""
    from kgwise.app import Pipeline

    if (correct is None) == (gold is None):
        raise ConfigError("give one of --correct, --wrong or --gold X")
    _guard(json_out, config, state)
    with Pipeline.from_config(config, state, models=False) as pipe:
        out = pipe.feedback(decision, correct=correct, gold=gold)
    print_feedback(out)
    save_json(out.to_dict(), json_out)


def print_feedback(fb: FeedbackResult) -> None:
    """``kgwise feedback`` for a person: what the router learnt and the budget after it."""
    covered = {None: "not revealed", True: "covered the truth", False: "missed the truth"}[fb.covered]
    console.print(f"decision {fb.decision}: arm {escape(fb.arm)} {'right' if fb.reward else 'wrong'}; "
                  f"its set {covered}; spent {fb.spent:.6g}, remaining {fb.remaining_budget:.6g}")
    if fb.observed:
        console.print("observed arms: " + escape(", ".join(
            f"{a} {'right' if r else 'wrong'}" for a, r in fb.observed.items())))
    if fb.warning:
        console.print(f"[yellow]warning: {escape(fb.warning)}[/yellow]")


@app.command("status")
@friendly_errors
def status(
    config: PipelineConfigOption = Path("kgwise.toml"),
    state: StateOption = None,
    json_out: JsonOption = None,
) -> None:
    """Budget, spending, pending decisions, and per arm pulls, cost and live set coverage (a table; the
    whole status as JSON with --json FILE)."""
    from kgwise.app import Pipeline

    _guard(json_out, config, state)
    with Pipeline.from_config(config, state, models=False) as pipe:
        out = pipe.status()
    print_status(out)
    save_json(out.to_dict(), json_out)


def print_status(st: PipelineStatus) -> None:
    """``kgwise status`` for a person: spend, sets, and a row per arm (drift in red)."""
    from rich.table import Table

    share = st.spent / st.budget if st.budget else 0.0
    console.print(f"[bold]budget[/bold] {st.budget:.6g} {st.unit}: spent {st.spent:.6g} ({share:.1%}), "
                  f"reserved {st.reserved:.6g}, remaining {st.remaining:.6g}"
                  + (f", overrun {st.overrun:.6g}" if st.overrun else ""))
    answered = sum(a.pulls for a in st.arms)  # paid answers; the router also saw the questions it refused
    refused = max(0, st.questions - answered)  # (the CLI owns the state: no question is in flight)
    console.print(f"{answered} question{'' if answered == 1 else 's'} answered"
                  + (f", {refused} refused (no affordable arm, or the arm failed)" if refused else "")
                  + f", {st.pending} waiting for feedback"
                  + (f", {st.expired} dropped unanswered" if st.expired else "")
                  + (f", {st.routed} routed to external arms awaiting their settle" if st.routed else "")
                  + (f"; pinned to [bold]{escape(st.pinned)}[/bold] by the fit" if st.pinned else ""))
    sets = (f"answer sets: α = {st.alpha:g}, δ = {st.delta:g}, "
            + ("calibrated" if st.calibrated else "not calibrated (run `kgwise fit`)"))
    console.print(escape(sets + (f" — {st.calibration_problem}" if st.calibration_problem else "")))
    if st.open_sets is not None:
        console.print(f"open questions' sets: {escape(st.open_sets)}")
    for arm, problem in st.prompt_problems.items():
        console.print(f"[yellow]{escape(arm)}: {escape(problem)}[/yellow]")
    if st.read_only:
        console.print(f"[red]read-only: {escape(st.read_only)}[/red]")
    for warning in st.state_warnings:
        console.print(f"[yellow]state: {escape(warning)}[/yellow]")
    table = Table("arm", "kind", "answers", "spent", "next sets calibrated on", "live coverage (bounds)")
    for a in st.arms:
        c = a.coverage
        if c.rate is None:
            live = "no feedback yet"
        else:
            live = f"{c.rate:.1%} of {c.n} ({c.lower:.1%}–{c.upper:.1%}; target {c.target:.0%})"
            live = f"[red]{live} drift[/red]" if c.drift else live
        if c.uncertified:
            live += f" (+{c.uncertified} uncertified)"
        if a.routed is None:
            routed = "—"
        else:
            routed = f"{a.routed.questions} held-out"
            if a.routed.open_questions is not None:
                routed += (f"; {a.routed.open_questions} open, "
                           + ("certified" if a.routed.open_certified else "[yellow]not certified[/yellow]"))
        table.add_row(escape(a.name), a.kind, str(a.pulls), f"{a.cost:.6g}", routed, live)
    console.print(table)
    for name, ab in st.abstention.items():  # [answer_sets] abstain: live
        if ab.asked:
            right = "no feedback yet" if ab.accuracy_answered is None else (
                f"right on {ab.accuracy_answered:.1%} of {ab.graded} graded")
            console.print(f"{escape(name)}: answered {ab.answered} of {ab.asked} ({ab.share_answered:.0%}), "
                          + right)


@app.command("fit")
@friendly_errors
def fit_command(
    questions: Annotated[Path | None, typer.Option(
        "--questions", help="Labelled dev questions (JSONL: id, text, choices?, gold | answer, "
        "topic_entities?).")] = None,
    log: Annotated[Path | None, typer.Option(
        "--log", exists=True, dir_okay=False, help="Instead of --questions: a graded log of outcomes you "
        "already have (JSONL: id, text, arms: {ARM: {answer, correct, cost | usage, signals?}}, ARM the "
        "config's arm names); no arm is called.")] = None,
    config: PipelineConfigOption = Path("kgwise.toml"),
    state: StateOption = None,
    max_spend: Annotated[float, typer.Option(
        "--max-spend", min=0.0, help="Refuse to start (and stop) beyond this spend, in the budget's unit "
        "(dollars or calls).")] = 0.0,
    concurrency: Annotated[int, typer.Option(min=1, help="Parallel calls of API arms.")] = 4,
    force: Annotated[bool, typer.Option("--force", help="Drop the decisions still awaiting feedback (a fit "
                                        "replaces the router they were made with).")] = False,
    json_out: JsonOption = None,
) -> None:
    """Run every arm on the dev questions (resumable), warm-start the router, calibrate per-arm sets; a
    table per arm (the whole report as JSON with --json FILE; it is also kept in the state folder)."""
    from kgwise.app import Pipeline, fit

    if (questions is None) == (log is None):
        raise ConfigError("give --questions FILE (the arms answer them) or --log FILE (outcomes you have)")
    _guard(json_out, config, state, **{"--questions": questions, "--log": log})
    with Pipeline.from_config(config, state, refit=True) as pipe:  # a router for other arms is replaced
        if log is not None:
            from kgwise.app.fit_log import fit_log

            report = fit_log(pipe, log, echo=say, force=force)
        else:
            assert questions is not None  # checked above
            report = fit(pipe, questions, max_spend, concurrency, echo=say, force=force)
    print_fit(report)
    save_json(report.to_dict(), json_out)


def print_fit(report: FitReport) -> None:
    """``kgwise fit`` for a person: a row per arm (on the dev log and in the fitted pipeline), the replay
    against the budget, what was not fitted and the sets' guarantee (the router's settings, the prompt
    bandits and the open sets are in the lines the fit printed as it went)."""
    from rich.table import Table

    def num(x: float | None, fmt: str) -> str:
        return "—" if x is None else format(x, fmt)

    table = Table("arm", "answered", "accuracy", f"cost/question ({report.unit})", "routed",
                  "sets calibrated on", "threshold", "coverage", "mean set size")
    for a in report.arms:
        pinned = " (pinned)" if report.router_selection and report.router_selection.pinned == a.name else ""
        table.add_row(escape(a.name) + pinned, str(a.answered), num(a.accuracy, ".3f"),
                      num(a.cost_mean, ".4g"), f"{a.share_routed:.0%}", f"{a.calibration_size} held-out",
                      num(a.threshold, ".3f"), num(a.in_sample_coverage, ".1%"), num(a.mean_set_size, ".2f"))
    console.print(table)
    console.print(f"replay of the fitted router: accuracy {report.replay_accuracy:.3f}, spend "
                  f"{report.replay_spend:.6g} of {report.budget:.6g} {report.unit}; this fit paid "
                  f"{report.spent:.6g} ({report.calls_made} calls, {report.calls_resumed} resumed)")
    for note in report.not_fitted:
        console.print(f"[yellow]not fitted: {escape(note)}[/yellow]")
    console.print(f"[dim]{escape(report.guarantee)}[/dim]")
