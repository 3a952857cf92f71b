"""``kgwise eval pipeline``: the pipeline end to end on recorded arms, on live arms on
OBQA / CSQA (6b: ``--live obqa|csqa``) and on WebQSP's open questions (6c: ``--live webqsp-open``)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from kgwise.cli.apps import eval_app
from kgwise.cli.common import (
    ConfigOption,
    DataOption,
    GradedLogOption,
    JsonOption,
    LogArmsOption,
    comma_list,
    err_console,
    friendly_errors,
    say,
    write_json,
)
from kgwise.config import data_dir
from kgwise.errors import ConfigError

if TYPE_CHECKING:
    from kgwise.app.config import OpenUncertified

class _LineBar:
    """A progress bar for logs: a line every ``every`` items or ``seconds`` (a terminal gets tqdm)."""

    def __init__(self, total: int, desc: str, every: int = 25, seconds: float = 60.0) -> None:
        self.total, self.desc, self.every, self.seconds = total, desc, every, seconds
        self.n = 0
        self.t0 = self.last = time.perf_counter()

    def update(self, k: int) -> None:
        self.n += k
        now = time.perf_counter()
        if k and (self.n % self.every == 0 or now - self.last >= self.seconds or self.n == self.total):
            self.last = now
            rate = (now - self.t0) / max(self.n, 1)
            left = rate * max(self.total - self.n, 0)
            err_console.print(f"{self.desc}: {self.n}/{self.total} ({rate:.2f} s each, about {left / 60:.1f} "
                              "min left)")

    def close(self) -> None:
        err_console.print(f"{self.desc}: {self.n}/{self.total} done in {time.perf_counter() - self.t0:.0f} s")


def _bar(total: int, desc: str) -> Any:
    from kgwise.progress import bar, interactive

    if interactive():
        return bar(total=total, desc=desc, dynamic_ncols=True, file=sys.stderr)
    return _LineBar(total, desc)


def _out_dir(out_dir: Path | None, json_out: Path | None, live: str) -> Path:
    """Where a live run's logs and state go: ``--out-dir``, else beside ``--json``, else under runs/."""
    if out_dir is not None:
        return out_dir
    if json_out is not None:
        return json_out.with_name(f"{json_out.stem}.run")
    return Path("runs") / f"eval-pipeline-{live}"


@eval_app.command("pipeline")
@friendly_errors
def eval_pipeline(
    dataset: Annotated[str, typer.Option(help="Replay data set (recorded outcomes): webqsp.")] = "webqsp",
    live: Annotated[str | None, typer.Option(
        help="Run live arms instead of replaying: obqa or csqa (the KG model, SmolLM2-135M and Gemma-3-270M "
        "with and without knowledge injection; needs --kgm-model) or webqsp-open (WebQSP's open questions "
        "over its Freebase fragment, a local model in free text with and without injected facts, UAG's "
        "sets attached).")] = None,
    budget: Annotated[float | None, typer.Option(
        min=0.0, help="Budget: a fraction of the cost of always calling an arm (see --budget-of) on the test "
        "questions (default: 1.0 replayed, 0.6 live; 1.0 for webqsp-open's one arm with --no-plain).",
        show_default=False)] = None,
    budget_of: Annotated[str | None, typer.Option(
        help="Arm whose cost the budget is a fraction of: 'dearest' (the most expensive) or 'best' (the most "
        "accurate; live: the most accurate paid arm on the fit log) (default: dearest replayed, best "
        "live).", show_default=False)] = None,
    log: GradedLogOption = None,
    log_arms: LogArmsOption = None,
    coke: Annotated[str, typer.Option(
        help="Router values: 'pipeline' (the pipeline's defaults for a paced budget over the [coke] "
        "settings, as `kgwise fit` with a horizon gets them) or 'settings' (the [coke] settings alone).")
                    ] = "pipeline",
    splits: Annotated[int, typer.Option(min=1, help="Random halvings (fit on one half, test on the other); "
                                        "live MCQ: of the fit and test questions, replayed from the logged "
                                        "answers for the coverage check (target: 50).")] = 10,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    context: Annotated[str, typer.Option(
        help="The config's [router] context: 'question', 'question+free' (the free ReaRev GNNs' top "
        "candidates and scores joined to the question), 'free' (those alone), 'predicted' (each arm's "
        "predicted success), 'predicted-free' (predicted from the free arms' confidence alone) or "
        "'cascade' (the free arm, escalated by a learned rule); `kgwise fit` replaces it by cross-fitting "
        "when the fit half is large enough.")] = "question",
    limit: Annotated[int | None, typer.Option(min=4, help="Only the first N questions (a quick look).")
                     ] = None,
    kgm_model: Annotated[Path | None, typer.Option(
        help="Live MCQ: the KG model arm (`kgwise kg model train --dataset D`).", exists=True, dir_okay=False)
                         ] = None,
    llm: Annotated[list[str] | None, typer.Option(
        "--llm", help="Live: a local LLM (repeat; default smollm2-135m and gemma3-270m for MCQ, smollm2-135m "
        "for webqsp-open); each gives a plain arm and a +kg (injection) arm.")] = None,
    fit_n: Annotated[int, typer.Option(min=2, help="Live: fit questions (training split; WebQSP: the "
                                       "first of test).")] = 300,
    test_n: Annotated[int, typer.Option(min=1, help="Live: test questions (OBQA test, CSQA ihtest; WebQSP: "
                                        "those after the fit ones).")] = 300,
    fit_offset: Annotated[int | None, typer.Option(
        min=0, help="Live MCQ: skip this many training questions before the fit ones (default: the first "
        "offset whose fit questions the KG model was not trained on, e.g. its --reserve range).",
        show_default=False)] = None,
    alphas: Annotated[str, typer.Option(help="The sets' α levels (live: the first is the pipeline's).")
                      ] = "0.1,0.2",
    delta: Annotated[float, typer.Option(
        help="δ of the sets' guarantees (UAG's: miss rate ≤ α with probability ≥ 1 − δ) and of the "
        "coverage bounds.")] = 0.05,
    sets: Annotated[bool, typer.Option(
        help="Replayed WebQSP: UAG's sets of the open answers, calibrated on each fit half (RoG's recorded "
        "generations as Φ(P); UAG's tables are built once and cached) and scored per arm the pipeline "
        "routed each test question to.")] = True,
    sets_calibration: Annotated[str, typer.Option(
        help="Replayed WebQSP sets: 'held-out' (what `kgwise fit` does with [answer_sets] uag_llm: 60 % of "
        "each fit half is held out of the router's learning and calibrates UAG per routed arm, re-selected "
        "before each test question) or 'fit-half' (the router learns the whole fit half; UAG calibrated on "
        "all of it, and per arm on the fit questions an out-of-fold router sends there).")] = "held-out",
    uncertified: Annotated[str, typer.Option(
        help="Replayed WebQSP, held-out sets: an answer's set when the held-out questions routed to its arm "
        "certify no λ — 'largest' (UAG's largest set) or 'pooled' (the set certified on all held-out "
        "questions), as [answer_sets] open_uncertified.")] = "largest",
    sets_questions: Annotated[Path | None, typer.Option(
        help="With --log: your labelled open questions (JSONL: id, text, gold, topic_entities; ids as the "
        "log's) for UAG's sets of the open answers, as WebQSP's replay gets them; with --sets-kg and "
        "--sets-generations (`eval uag --questions`'s inputs).")] = None,
    sets_kg: Annotated[str | None, typer.Option(help="With --sets-questions: their KG (a graph file).")
                       ] = None,
    sets_generations: Annotated[Path | None, typer.Option(
        help="With --sets-questions: recorded Φ(P) (JSONL: id, answer).")] = None,
    compare_open_scores: Annotated[str | None, typer.Option(
        help="Replayed open sets: also, on the same splits, UAG's sets with these evaluator scores in Λ "
        "(comma-separated, e.g. absolute,relative,items,items-relative,learned), reported under "
        "'compared'.")] = None,
    mc_draw: Annotated[str | None, typer.Option(
        help="With --log, its multiple-choice sets: FIT,TEST questions drawn at random per split instead "
        "of halving the log (e.g. 50,100: a newcomer's dev log, tested on more questions).")] = None,
    mc_splits: Annotated[int | None, typer.Option(
        min=1, help="With --log, its multiple-choice sets: random splits (default: --splits; the routing "
        "replay of a long log is slower than the sets' check).", show_default=False)] = None,
    set_kind: Annotated[str, typer.Option(
        help="With --log, its multiple-choice sets' non-conformity score: lac or aps ([answer_sets] kind).")
                        ] = "lac",
    scoring: Annotated[str, typer.Option(help="Live MCQ: how LLM arms rank choices: sum, mean or pmi.")
                       ] = "pmi",
    combo: Annotated[str, typer.Option(
        help="Live: the inject arms' extractor+format; several, comma-separated (P_sub+F_t,P_sub+F_s): the "
        "fit learns each inject arm's prompt bandit over them.")] = "P_sub+F_t",
    price_model: Annotated[str, typer.Option(
        help="Live: price-table model whose token prices give the dollar figure of the local models' "
        "tokens.")] = "llama-2-7b",
    plain: Annotated[bool, typer.Option(
        help="Live webqsp-open: also the plain LLM arm beside the +kg one.")] = True,
    inject: Annotated[bool, typer.Option(
        help="Live MCQ: also each LLM's +kg (knowledge injection) arm beside the plain one.")] = True,
    tune_fraction: Annotated[float, typer.Option(
        min=0.05, max=0.95, help="Live webqsp-open: share of the fit questions that tunes UAG's grid and "
        "teaches the router (the rest is held out of the router and calibrates the sets per routed arm).")
        ] = 0.4,
    data_topics: Annotated[bool, typer.Option(
        help="Live webqsp-open: beside the pipeline's own sets (its grounding's topic entities), UAG's sets "
        "with the data set's topic entities at every α.")] = True,
    max_tokens: Annotated[int, typer.Option(
        min=1, help="Live webqsp-open: most tokens of a free-text answer (and of UAG's Φ(P)).")] = 16,
    out_dir: Annotated[Path | None, typer.Option(
        help="Live: where the run's logs and pipeline state go (resumed when rerun; default: beside "
        "--json, else runs/eval-pipeline-LIVE).")] = None,
    config: ConfigOption = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """The pipeline (fit → answer → feedback) on recorded arms (WebQSP's, or your graded log's; mean ± std
    over random splits), or with --live on live arms: per arm and pipeline accuracy, cost, share routed,
    spent/budget, sets' coverage and size."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from kgwise.app.config import CONTEXTS, paced_coke
    from kgwise.settings import configured

    if coke not in ("pipeline", "settings"):
        raise ConfigError(f"--coke must be 'pipeline' or 'settings', got {coke!r}")
    if context not in CONTEXTS:
        raise ConfigError(f"--context must be one of {', '.join(CONTEXTS)}, got {context!r}")
    from kgwise.eval.pipeline_sets import CALIBRATIONS, UNCERTIFIED

    if sets_calibration not in CALIBRATIONS:
        raise ConfigError(f"--sets-calibration must be one of {', '.join(CALIBRATIONS)}, got "
                          f"{sets_calibration!r}")
    if uncertified not in UNCERTIFIED:
        raise ConfigError(f"--uncertified must be one of {', '.join(UNCERTIFIED)}, got {uncertified!r}")
    settings_coke = configured("coke", config)
    router = paced_coke(settings_coke) if coke == "pipeline" else settings_coke
    levels = comma_list(alphas, "--alphas", float)
    draw = None if mc_draw is None else tuple(comma_list(mc_draw, "--mc-draw", int))
    if draw is not None and (len(draw) != 2 or log is None):
        raise ConfigError(f"--mc-draw takes FIT,TEST (two numbers) with --log, got {mc_draw!r}")
    if set_kind not in ("lac", "aps"):
        raise ConfigError(f"--set-kind must be lac or aps, got {set_kind!r}")
    if live is not None:
        from kgwise.eval.pipeline_run import LiveOptions, run_live

        opts = LiveOptions(live, budget, budget_of, seed, splits, kgm_model, tuple(llm or ()), fit_n, test_n,
                           fit_offset, levels, scoring, combo, price_model, plain, tune_fraction,
                           max_tokens, data_topics, delta, inject)
        report = run_live(opts, router, data_dir(data), _out_dir(out_dir, json_out, live), say, _bar)
        write_json(report, json_out)
        return
    from kgwise.embed import MiniLM
    from kgwise.eval.pipeline import PipelineEvalConfig, replay_report
    from kgwise.eval.route.logs import arm_lines, graded_replay, webqsp_replay

    own_sets = {"--sets-questions": sets_questions, "--sets-kg": sets_kg,
                "--sets-generations": sets_generations}
    if any(v is not None for v in own_sets.values()) and (log is None or None in own_sets.values()):
        raise ConfigError(f"{', '.join(own_sets)} go together, with --log")
    if log is None and log_arms:
        raise ConfigError("--arm goes with --log FILE (WebQSP's arms are known)")
    if log is None and dataset != "webqsp":
        raise ConfigError(f"replay data set {dataset!r} has no recorded outcomes (only 'webqsp' has): give "
                          "your graded log with --log FILE --arm NAME:CLUSTER:ACCURACY …")
    root = data_dir(data) if log is None else None
    mc = None
    if log is None:
        replay = webqsp_replay(data_dir(data)).head(limit)
    else:  # a log whose arms give choice probabilities: its multiple-choice sets too, checked now
        from kgwise.datasets.user import read_graded_log
        from kgwise.eval.pipeline_mc import read_mc_log

        graded = read_graded_log(log)
        replay = graded_replay(graded, arm_lines(log_arms or []), str(log)).head(limit)
        mc = read_mc_log(log, replay, graded)
    compare = None if compare_open_scores is None else tuple(
        s.strip() for s in compare_open_scores.split(",") if s.strip())
    routed_sets = None
    if sets and (root is not None or sets_questions is not None):
        from kgwise.eval.pipeline_sets import user_sets, webqsp_sets

        how: dict[str, Any] = {"calibration": sets_calibration,
                               "uncertified": cast("OpenUncertified", uncertified),
                               "progress": say, "compare_scores": compare}
        if root is not None:
            routed_sets = webqsp_sets(root, replay.table, levels, delta, **how)
        else:
            from kgwise.eval.uag.experiment import load_user_data

            assert sets_questions is not None and sets_kg is not None
            routed_sets = user_sets(load_user_data(sets_questions, sets_kg, sets_generations), replay.table,
                                    levels, delta, **how)
    cfg = PipelineEvalConfig(1.0 if budget is None else budget, splits, seed, router, budget_of or "dearest",
                             context)
    err_console.print(f"{replay.table.n_questions} questions × {replay.table.n_arms} arms; embedding "
                      "questions …")
    encoder = MiniLM()
    report = replay_report(replay, encoder, cfg, progress=say, sets=routed_sets,
                           dataset=log.stem if log is not None else dataset)
    if mc is not None:
        from kgwise.eval.pipeline_mc import replay_mc_sets

        report["multiple_choice_sets"] = replay_mc_sets(
            mc, encoder, levels, cfg.budget, mc_splits or splits, seed, router, delta, str(log), say,
            None if draw is None else (draw[0], draw[1]), set_kind)
    elif log is not None:
        report["multiple_choice_sets"] = {"not_measured": "no replayed arm gives probabilities over choices"}
    if json_out is not None and routed_sets is not None:
        from kgwise.eval.pipeline_plots import plot_set_coverage

        png = json_out.with_name(f"{json_out.stem}_sets.png")
        figure = plot_set_coverage(report["runs"], replay.table.arms, png, routed_sets.calibration,
                                   routed_sets.uncertified)
        report["figures"] = [] if figure is None else [str(figure)]
    write_json(report, json_out)


__all__ = ["eval_pipeline"]
