"""``KnowledgeInjector`` composition, the experiment's data splits and table, and a real end-to-end answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.eval.knowgpt import markdown_table, split_questions
from kgwise.extract import RankedEvidence, SubgraphExtractor, rank_evidence
from kgwise.inject import ARMS, WITHOUT_KG, InjectorConfig, KnowledgeInjector, PromptBandit
from kgwise.inject.injector import CHARS_PER_TOKEN, KNOWLEDGE_TOKENS, KNOWLEDGE_TOKENS_MIN
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder
from kgwise.llm import ChoiceScores, Generation
from kgwise.llm.answering import PRIOR_CONTEXT
from kgwise.render import FormatConfig, make_format, select_edges
from kgwise.render.prompts import answer_prompt
from kgwise.types import Question, Usage


@cache
def _ddb(data: Path) -> CSRGraph:
    from kgwise.kg.loaders import load_ddb

    return load_ddb(data / "ddb")


@cache
def _medqa(data: Path) -> tuple[Question, ...]:
    from kgwise.datasets import load

    return tuple(load("medqa", "test", data))


class ScriptedLLM:
    """Test double for the LLM protocol: records contexts; prefers the choice named in the context."""

    name = "scripted"

    def __init__(self) -> None:
        self.contexts: list[str] = []

    def generate(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Sequence[str] | None = None) -> Generation:
        return Generation("a description", Usage(calls=1, output_tokens=2))

    def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        self.contexts.append(context)
        lp = tuple(-1.0 if c.strip().lower() in context.lower() else -5.0 for c in choices)
        return ChoiceScores(lp, lp, Usage(calls=1, input_tokens=len(context.split())))


def _question_with_knowledge(kg: CSRGraph, qs: Sequence[Question]) -> Question:
    """The first question whose P_sub subgraph holds a path from a question concept to a choice (what
    ranked knowledge renders)."""
    grounder, psub = Grounder(kg), SubgraphExtractor(kg)
    for q in qs:
        sub = psub.extract(q, grounder.ground(q))
        if rank_evidence(sub, sub.question_nodes, sub.choice_nodes).paths:
            return q
    raise AssertionError("no MedQA question with a question→choice path in its P_sub subgraph")


def test_injector_composes_ground_extract_render_and_score(data_dir: Path) -> None:
    kg = _ddb(data_dir)
    q = _question_with_knowledge(kg, _medqa(data_dir)[:50])
    llm = ScriptedLLM()
    formats = {n: make_format(n, llm) for n in ("F_t", "F_s", "F_g")}  # type: ignore[arg-type]
    inj = KnowledgeInjector(kg, Grounder(kg), {"P_sub": SubgraphExtractor(kg)}, formats, llm)  # type: ignore[arg-type]
    assert inj.combos() == ["P_sub+F_t", "P_sub+F_s", "P_sub+F_g"]
    result = inj.inject(q, "P_sub+F_t")
    a = result.answer
    assert a.combo == "P_sub+F_t" and a.arm == "scripted" and a.knowledge.startswith("(")
    assert a.prediction in {c.label for c in q.choices}
    assert sum(a.probabilities.values()) == pytest.approx(1.0)
    assert "Background knowledge:" in llm.contexts[-1] and a.knowledge in llm.contexts[-1]
    assert llm.contexts[-1].rstrip().endswith("Answer:")
    assert set(result.timings_ms) == {"ground", "extract", "render", "evidence"}
    assert result.prep_ms == pytest.approx(sum(result.timings_ms.values()))
    g = inj.inject(q, "P_sub+F_g")
    assert g.answer.knowledge == "a description" and g.answer.usage.calls == 2  # description + scoring
    plain = inj.answer_without_knowledge(q)
    assert plain.answer.combo == WITHOUT_KG and "Background" not in llm.contexts[-1]
    with pytest.raises(ConfigError, match="needs a trained P_RL policy"):
        inj.inject(q, "P_RL+F_t")
    with pytest.raises(ConfigError, match="unknown combination"):
        inj.inject(q, "P_sub+F_x")
    with pytest.raises(ConfigError, match="no prompt bandit"):
        inj.inject(q)


class FirstChoiceLikelyLLM(ScriptedLLM):
    """As :class:`ScriptedLLM`, but without a question the first choice is likely (a short, frequent
    answer), so only PMI sees that the question does not favour it."""

    def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        if context == PRIOR_CONTEXT:
            self.contexts.append(context)
            lp = tuple(-0.1 if i == 0 else -5.0 for i in range(len(choices)))
            return ChoiceScores(lp, lp, Usage(calls=1, input_tokens=2))
        return super().score_choices(context, choices)


def test_pmi_scoring_discounts_the_choice_prior_fetched_once_per_question(data_dir: Path) -> None:
    kg = _ddb(data_dir)
    q = _question_with_knowledge(kg, _medqa(data_dir)[:50])
    llm = FirstChoiceLikelyLLM()
    formats = {"F_t": make_format("F_t", llm)}  # type: ignore[arg-type]
    inj = KnowledgeInjector(kg, Grounder(kg), {"P_sub": SubgraphExtractor(kg)}, formats, llm,  # type: ignore[arg-type]
                            config=InjectorConfig("pmi"))
    first, second = inj.inject(q, "P_sub+F_t"), inj.inject(q, "P_sub+F_t")
    assert llm.contexts.count(PRIOR_CONTEXT) == 1  # memoised by the choices
    assert first.answer.usage.calls == 2 and second.answer.usage.calls == 1
    prior = inj.prior(q)
    pmi = np.array(first.scores.logprobs) - np.array(prior.logprobs)
    assert first.answer.prediction == q.choices[int(np.argmax(pmi))].label
    assert first.answer.probabilities[q.choices[0].label] < 0.5  # the a-priori-likely choice gains nothing
    assert first.answer.prediction == second.answer.prediction
    with pytest.raises(ConfigError, match="scoring"):
        InjectorConfig("max")  # type: ignore[arg-type]


def test_injector_asks_the_bandit_for_the_combination(data_dir: Path) -> None:
    kg = _ddb(data_dir)
    q = _medqa(data_dir)[3]
    llm = ScriptedLLM()
    enc = MiniLM()
    formats = {n: make_format(n, llm) for n in ("F_t", "F_s")}  # type: ignore[arg-type]
    arms = ["P_sub+F_t", "P_sub+F_s"]
    bandit = PromptBandit(enc.dim, arms)
    c = enc.encode([q.text])[0]
    for _ in range(3):
        bandit.update("P_sub+F_s", c, 1.0)
        bandit.update("P_sub+F_t", c, 0.0)
    inj = KnowledgeInjector(kg, Grounder(kg), {"P_sub": SubgraphExtractor(kg)}, formats, llm,  # type: ignore[arg-type]
                            bandit=bandit, encoder=enc)
    assert inj.answer(q).combo == "P_sub+F_s"
    with pytest.raises(ConfigError, match="encoder"):
        KnowledgeInjector(kg, Grounder(kg), {}, formats, llm, bandit=bandit)  # type: ignore[arg-type]


def test_medqa_split_is_fixed_half_and_disjoint(data_dir: Path) -> None:
    train, tests = split_questions("medqa", data_dir, seed=0)
    test = tests["test-half"]
    assert len(train) == 636 and len(test) == 637
    assert not {q.id for q in train} & {q.id for q in test}
    again, _ = split_questions("medqa", data_dir, seed=0)
    assert [q.id for q in again] == [q.id for q in train]
    other, _ = split_questions("medqa", data_dir, seed=1)
    assert [q.id for q in other] != [q.id for q in train]


def test_markdown_table_has_the_rows_of_tables_3_and_4() -> None:
    split = {"n": 3, "without_kg": {"accuracy": 0.2},
             "combos": {a: {"accuracy": 0.1 * i, "no_kg_edges": 1 if "P_RL" in a else None}
                        for i, a in enumerate(ARMS)},
             "full": {"accuracy": 0.45}, "full_bandit_feedback": {"accuracy": 0.35},
             "kg_links": {"accuracy": 0.25}}
    table = markdown_table({"medqa": {"splits": {"test-half": split}, "scoring": {"chosen": "pmi"}}})
    lines = table.splitlines()
    assert lines[0] == "| setting | medqa test-half (n=3) |"
    assert "| w/o KG | 0.200 |" in lines and "| full KnowGPT | 0.450 |" in lines
    assert "| P_RL × F_g | 0.500 |" in lines and "| facts only (OBQA) | – |" in lines
    assert "| best single by training reward | – |" in lines
    assert "| full KnowGPT, bandit feedback (the paper) | 0.350 |" in lines
    assert "| choice scoring | pmi |" in lines and "| most KG-linked choice (no LLM) | 0.250 |" in lines
    # share of questions with KG edges: unknown for runs recorded before the count existed
    assert lines[-2:] == ["| questions with KG edges from P_sub | – |",
                          "| questions with KG edges from P_RL | 0.667 |"]
    assert "| full − best single (points ± paired SE) | – |" in lines  # a report without targets
    assert len(lines) == 2 + 1 + 1 + len(ARMS) + 1 + 1 + 1 + 2 + 1 + 1 + 2


@pytest.mark.slow
def test_injector_answers_a_real_medqa_question_end_to_end_with_the_local_model(data_dir: Path) -> None:
    from kgwise.llm import get_llm

    kg = _ddb(data_dir)
    q = _question_with_knowledge(kg, _medqa(data_dir)[:50])
    llm = get_llm("smollm2-135m")
    formats = {n: make_format(n, llm) for n in ("F_t", "F_s")}
    inj = KnowledgeInjector(kg, Grounder(kg), {"P_sub": SubgraphExtractor(kg)}, formats, llm)
    result = inj.inject(q, "P_sub+F_s")
    a = result.answer
    assert a.question_id == q.id and a.prediction in {c.label for c in q.choices}
    assert a.combo == "P_sub+F_s" and a.arm == llm.name
    assert a.knowledge and a.knowledge.endswith(".") and "(" not in a.knowledge
    p = np.array(list(a.probabilities.values()))
    assert p.sum() == pytest.approx(1.0) and (p > 0).all()
    assert a.usage.calls >= 1 and a.usage.input_tokens > len(q.text.split())


def test_ranked_knowledge_is_the_question_choice_paths_cut_to_the_token_budget(data_dir: Path) -> None:
    """On MedQA over DDB: the prompt renders the ranked question→choice paths within the token budget
    (the whole subgraph with ``knowledge_tokens=None``, as before ranking), and the support of the
    chosen answer ends at one of its concepts."""
    kg = _ddb(data_dir)
    qs = _medqa(data_dir)[:40]
    llm = ScriptedLLM()
    formats = {"F_t": make_format("F_t")}
    ranked_inj = KnowledgeInjector(kg, Grounder(kg), {"P_sub": SubgraphExtractor(kg)}, formats, llm,  # type: ignore[arg-type]
                                   config=InjectorConfig(knowledge_tokens=32, knowledge_ratio=None))
    full_inj = KnowledgeInjector(kg, Grounder(kg), {"P_sub": SubgraphExtractor(kg)}, formats, llm,  # type: ignore[arg-type]
                                 config=InjectorConfig(knowledge_tokens=None))
    shorter = 0
    for q in qs:
        r = ranked_inj.inject(q, "P_sub+F_t")
        f = full_inj.inject(q, "P_sub+F_t")
        assert r.subgraph == f.subgraph and r.ranked == f.ranked
        # full: the paths all of whose facts the 8 rendered facts hold
        rendered = set(select_edges(f.subgraph, 8, kg))
        assert [rp for rp in f.ranked.paths if set(rp.path.edges()) <= rendered] == list(f.given.paths)
        assert ranked_inj.knowledge_tokens(r.given.paths, r.subgraph, formats["F_t"]) <= 32
        assert -(-len(r.answer.knowledge) // CHARS_PER_TOKEN) <= 32  # the budget is the rendered text's
        assert set(r.given.paths) <= set(r.ranked.paths)
        assert f.answer.knowledge == formats["F_t"].render(kg, f.subgraph, q).text  # the whole subgraph
        lines = {x for x in r.answer.knowledge.splitlines() if x}
        assert lines <= set(_fact_lines(kg, r.given))  # only the kept paths' facts
        chosen = [c.label for c in q.choices].index(r.answer.prediction)
        for rp in r.given.supporting(chosen).paths:
            assert rp.path.nodes[-1] in r.subgraph.choice_nodes[chosen]
            assert rp.path.nodes[0] in r.subgraph.question_nodes
        shorter += len(r.answer.knowledge) < len(f.answer.knowledge)
        for done in (r, f):
            assert done.prompt_chars == len(answer_prompt(q.text, done.answer.knowledge))
    assert shorter >= len(qs) // 2


def _fact_lines(kg: CSRGraph, given: RankedEvidence) -> list[str]:
    """F_t's lines of every fact of the ``given`` paths."""
    return make_format("F_t", config=FormatConfig(max_triples=10_000)).render(
        kg, given.as_subgraph()).text.splitlines()


def test_the_knowledge_budget_follows_the_question_length_within_the_cap() -> None:
    """At most ``knowledge_ratio`` knowledge tokens per question token (characters / 4), never below the
    floor nor above ``knowledge_tokens``; ``None`` turns either off."""
    short, long = "Where are you likely to find a hamburger?", "A 45-year-old man presents with pain. " * 20
    cfg = InjectorConfig()
    assert cfg.knowledge_ratio == 2.0 and cfg.budget(short) == 20  # 41 characters: 10 tokens, twice that
    assert cfg.budget("x" * 20) == KNOWLEDGE_TOKENS_MIN == 12  # 5 tokens: the floor
    assert cfg.budget("x" * 100) == cfg.budget(long) == KNOWLEDGE_TOKENS == 48  # the cap
    assert InjectorConfig(knowledge_ratio=0.5).budget("x" * 100) == 12
    assert InjectorConfig(knowledge_ratio=1.0).budget("x" * 80) == 20
    assert InjectorConfig(knowledge_ratio=None).budget(short) == 48
    assert InjectorConfig(knowledge_tokens=None).budget(long) is None
    assert InjectorConfig(knowledge_tokens=8).budget(long) == 8  # the cap binds below the floor too
    for bad in (0.0, -1.0):
        with pytest.raises(ConfigError, match="knowledge_ratio must be > 0"):
            InjectorConfig(knowledge_ratio=bad)


def test_a_short_question_gets_short_knowledge_from_the_best_paths(data_dir: Path) -> None:
    """On MedQA over DDB, each question whole (the cap binds) and cut to its last sentence (the question's
    own length binds): the kept paths render within the question's budget, and every ranked path left
    out did not fit after the better ones kept (or would pass the format's 8 facts)."""
    kg = _ddb(data_dir)
    llm = ScriptedLLM()
    formats = {n: make_format(n) for n in ("F_t", "F_s")}
    inj = KnowledgeInjector(kg, Grounder(kg), {"P_sub": SubgraphExtractor(kg)}, formats, llm)  # type: ignore[arg-type]
    checked = 0
    cut = [replace(q, text=q.text.rstrip("?").split(". ")[-1] + "?") for q in _medqa(data_dir)[:20]]
    assert all(len(q.text) < 200 for q in cut)
    for q in (*_medqa(data_dir)[:20], *cut):
        r = inj.inject(q, "P_sub+F_s")
        budget = inj.config.budget(q.text)
        assert budget is not None
        assert inj.knowledge_tokens(r.given.paths, r.subgraph, formats["F_s"]) <= budget
        kept = set(r.given.paths)
        for i, rp in enumerate(r.ranked.paths):  # a path left out did not fit after the better ones kept
            if rp not in kept and len({e for p in r.ranked.paths[:i] if p in kept for e in p.path.edges()}
                                      | set(rp.path.edges())) <= 8:
                before = [p for p in r.ranked.paths[:i] if p in kept]
                assert inj.knowledge_tokens([*before, rp], r.subgraph, formats["F_s"]) > budget
        checked += bool(r.given.paths)
    assert checked >= 10
