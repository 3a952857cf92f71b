"""``kgwise eval pipeline --live``: the questions, arms and runners of a live run, then its evaluation
(:mod:`kgwise.eval.pipeline_live` on OBQA / CSQA, :mod:`kgwise.eval.pipeline_open` on WebQSP's open
questions)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgwise.errors import ConfigError
from kgwise.llm.local_models import DEFAULT_LLM

__all__ = ["LIVE", "LiveOptions", "kgm_trained_on", "run_live", "unseen_offset"]

LIVE = ("obqa", "csqa", "webqsp-open")


@dataclass(frozen=True)
class LiveOptions:
    """A live run's settings, as ``kgwise eval pipeline --live`` takes them (see its options)."""

    live: str
    budget: float | None
    budget_of: str | None
    seed: int
    splits: int
    kgm_model: Path | None
    llms: tuple[str, ...]
    fit_n: int
    test_n: int
    fit_offset: int | None
    alphas: tuple[float, ...]
    scoring: str
    combo: str
    price_model: str
    plain: bool = True
    tune_fraction: float = 0.4
    max_tokens: int = 16
    data_topics: bool = True
    delta: float = 0.05
    inject: bool = True


def run_live(o: LiveOptions, router: Any, root: Path, out_dir: Path, progress: Callable[[str], None],
             bar: Callable[[int, str], Any]) -> dict[str, Any]:
    """The live run's report; its logs and pipeline state go to ``out_dir`` (resumed when rerun)."""
    from kgwise.app.arms import build_runner
    from kgwise.datasets import load
    from kgwise.embed import MiniLM
    from kgwise.eval.pipeline_live import LIVE_SPLITS, LiveMCConfig

    live, budget, budget_of, seed, splits = o.live, o.budget, o.budget_of, o.seed, o.splits
    kgm_model, llms, fit_n, test_n, fit_offset = o.kgm_model, o.llms, o.fit_n, o.test_n, o.fit_offset
    alphas, scoring, combo, price_model, delta = o.alphas, o.scoring, o.combo, o.price_model, o.delta
    if live not in LIVE:
        raise ConfigError(f"--live must be one of {', '.join(LIVE)}, got {live!r}")
    if scoring not in ("sum", "mean", "pmi"):
        raise ConfigError(f"--scoring must be sum, mean or pmi, got {scoring!r}")
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"--delta must lie in (0, 1), got {delta:g}")
    t0 = time.perf_counter()
    if live == "webqsp-open":
        if kgm_model is not None:
            raise ConfigError("--kgm-model is for --live obqa|csqa (a KG model answers multiple choice only)")
        from kgwise.conformal.calibrated import labelled_questions
        from kgwise.conformal.evaluator import LLMGenerator
        from kgwise.eval.pipeline_open import evaluate_live_open, open_arms
        from kgwise.kg.sources import open_graph
        from kgwise.llm import get_llm

        specs = list(llms) or [DEFAULT_LLM]
        if len(specs) != 1:
            raise ConfigError("--live webqsp-open takes one --llm (its plain and +kg arms)")
        questions = labelled_questions(load("webqsp", "test", root), "webqsp test")
        if fit_n + test_n > len(questions):
            raise ConfigError(f"WebQSP test has {len(questions)} questions with gold answers and topic "
                              f"entities; --fit-n + --test-n = {fit_n + test_n}")
        fit_q, test_q = questions[:fit_n], questions[fit_n:fit_n + test_n]
        kg_path = root / "webqsp" / "freebase_fragment.tsv"
        kg = open_graph(kg_path)
        plain, tune_fraction, max_tokens, data_topics = o.plain, o.tune_fraction, o.max_tokens, o.data_topics
        # one arm (--no-plain): a budget below its own cost would only refuse questions
        fraction = budget if budget is not None else (0.6 if plain else 1.0)
        cfg = LiveMCConfig(fit_n, test_n, 0, alphas, fraction, budget_of or "best", seed, router, delta=delta,
                           price_model=price_model)
        arms = open_arms(specs[0], combo, max_tokens, plain)
        runners = {a.name: build_runner(a, kg) for a in arms}
        progress(f"webqsp-open: {len(fit_q)} fit + {len(test_q)} test questions, arms "
                          f"{', '.join(runners)}; KG {kg_path} (loaded in {time.perf_counter() - t0:.0f} s)")
        return {"live": live, **evaluate_live_open(
            fit_q, test_q, runners, MiniLM(), kg, LLMGenerator(get_llm(specs[0], cache=True), max_tokens),
            specs[0], cfg, out_dir, {"live": live, "kg": str(kg_path)}, progress, bar,
            tune_fraction, data_topics)}
    from kgwise.eval.pipeline_live import evaluate_live_mcq, live_mcq_arms
    from kgwise.kg.benchmarks import benchmark_kg

    if kgm_model is None:
        raise ConfigError(f"--live {live} needs --kgm-model (train one: kgwise kg model train "
                          f"--dataset {live} "
                          "--kind graph --out M.pt)")
    trained = kgm_trained_on(kgm_model)
    if trained is not None and trained[0] != live:
        raise ConfigError(f"{kgm_model} was trained on {trained[0]}, not {live}")
    spans = trained[1] if trained is not None else []
    offset = unseen_offset(spans, fit_n) if fit_offset is None else fit_offset
    seen = [f"{a}:{b}" for a, b in spans if a < offset + fit_n and offset < b]
    if seen:
        raise ConfigError(f"{kgm_model} was trained on {LIVE_SPLITS[live][0]} questions {', '.join(seen)}: "
                          f"fitting on {offset}:{offset + fit_n} would overrate it; choose a --fit-offset "
                          "whose fit questions it has not seen (train it with --reserve START:STOP)")
    fit_split, test_split = LIVE_SPLITS[live]
    train = load(live, fit_split, root)
    test = load(live, test_split, root)
    if offset + fit_n > len(train) or test_n > len(test):
        raise ConfigError(f"{live}: {len(train)} {fit_split} questions (fit {offset}+{fit_n} asked) and "
                          f"{len(test)} {test_split} questions ({test_n} asked)")
    fit_q, test_q = train[offset:offset + fit_n], test[:test_n]
    kg = benchmark_kg(live, root)
    cfg = LiveMCConfig(fit_n, test_n, offset, alphas, 0.6 if budget is None else budget, budget_of or "best",
                       seed, router, delta=delta, price_model=price_model)
    arms = live_mcq_arms(kgm_model, tuple(llms or ("smollm2-135m", "gemma3-270m")), scoring, combo, root,
                         o.inject)
    runners = {a.name: build_runner(a, kg) for a in arms}
    progress(f"{live}: fit on {fit_split}[{offset}:{offset + fit_n}], test on "
                      f"{test_split}[:{test_n}]; arms {', '.join(runners)} (loaded in "
                      f"{time.perf_counter() - t0:.0f} s)")
    encoder = MiniLM()
    report = evaluate_live_mcq(fit_q, test_q, runners, encoder, kg, cfg, out_dir,
                               {"live": live, "kgm": str(kgm_model.resolve()), "scoring": scoring,
                                "combo": combo}, progress, bar)
    from kgwise.datasets.user import write_graded_log
    from kgwise.eval.pipeline_live import coverage_splits, live_graded_log, logged_answers

    both = [*fit_q, *test_q]
    learnt = [a.name for a in arms if a.combos]
    if learnt:  # the fit log holds one answer per combination of these arms; the splits replay one per arm
        why = (f"not run: {', '.join(learnt)} learn their prompt (--combo {combo}); the coverage splits "
               "replay one logged answer per arm and question — run them with one --combo")
        progress(f"coverage check {why}")
        report["coverage_splits"] = {"skipped": why}
    else:
        # every arm's answer on every question, kept as a graded log (`eval route --log`, `fit --log`)
        graded = out_dir / "graded.jsonl"
        write_graded_log(graded, live_graded_log(out_dir, both, arms, cfg.price_model))
        report["graded_log"] = str(graded)
        progress(f"graded log of the {len(both)} questions × {len(arms)} arms: {graded}; coverage check: "
                 f"{splits} random halvings, replayed …")
        answers = logged_answers(out_dir, both, arms, cfg.price_model)
        with tempfile.TemporaryDirectory(prefix="kgwise-live-splits-") as tmp:
            report["coverage_splits"] = coverage_splits(both, arms, answers, encoder, cfg, splits, Path(tmp))
    return {"live": live, "fit_split": fit_split, "test_split": test_split, **report}


def kgm_trained_on(model: Path) -> tuple[str, list[tuple[int, int]]] | None:
    """``(data set, half-open index spans of its training split)`` a KG model file's config records, if it
    does (a file from before ``train_spans``: the first ``train_questions``)."""
    from kgwise.files import read_json
    from kgwise.kgm.io import config_path

    cfg = read_json(config_path(model))
    report = cfg.get("report", {}) if isinstance(cfg, dict) else {}
    if not isinstance(report, dict) or "dataset" not in report or "train_questions" not in report:
        return None
    spans = report.get("train_spans", [[0, report["train_questions"]]])
    return str(report["dataset"]), [(int(a), int(b)) for a, b in spans]


def unseen_offset(spans: Sequence[tuple[int, int]], n: int) -> int:
    """The first offset whose ``n`` questions lie outside every trained span."""
    for start in sorted({0, *(b for _, b in spans)}):
        if all(start + n <= a or b <= start for a, b in spans):
            return start
    raise AssertionError("unreachable: the end of the last span is always free")
