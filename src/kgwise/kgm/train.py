"""Training and evaluation of the KG model and its baseline: cross-entropy over each question's choices
(as QA-GNN), AdamW, gradient clipping, early stopping on dev accuracy, a wall-clock cap."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch

from kgwise.errors import ConfigError
from kgwise.kgm.config import TrainConfig
from kgwise.kgm.features import NodeTable, QuestionGraph, collate
from kgwise.kgm.model import GraphQA, TextQA
from kgwise.progress import Estimate, duration
from kgwise.progress import bar as progress_bar

__all__ = ["TrainConfig", "TrainResult", "evaluate", "predict_proba", "set_seed", "train_model"]


@dataclass(slots=True)
class TrainResult:
    """What training did: per-epoch history, the best dev epoch and accuracy, seconds spent."""

    best_epoch: int
    best_dev_accuracy: float
    seconds: float
    stopped: str
    history: list[dict[str, float]] = field(default_factory=list)


def set_seed(seed: int, threads: int = 1) -> None:
    """Seed torch and numpy; limit torch to ``threads`` CPU threads."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(threads)


def _with_graph(model: GraphQA | TextQA) -> bool:
    return isinstance(model, GraphQA)


@torch.no_grad()
def predict_proba(
    model: GraphQA | TextQA, graphs: Sequence[QuestionGraph], table: NodeTable | None, batch_size: int = 64
) -> list[npt.NDArray[np.float64]]:
    """Softmax over each question's choices, one array per question (in ``graphs`` order)."""
    model.eval()
    R = model.config.num_relations
    out: list[npt.NDArray[np.float64]] = []
    for start in range(0, len(graphs), batch_size):
        chunk = graphs[start : start + batch_size]
        batch = collate(chunk, table, R, with_graph=_with_graph(model))
        probs = torch.softmax(model(batch).double(), dim=-1).numpy()
        out += [probs[i, : g.num_choices] for i, g in enumerate(chunk)]
    return out


def evaluate(
    model: GraphQA | TextQA, graphs: Sequence[QuestionGraph], table: NodeTable | None, batch_size: int = 64
) -> float:
    """Accuracy on ``graphs`` (all must have a gold label)."""
    if not graphs:
        raise ConfigError("evaluate: no questions")
    if any(g.label < 0 for g in graphs):
        raise ConfigError("evaluate: some questions have no gold label")
    probs = predict_proba(model, graphs, table, batch_size)
    return float(np.mean([int(np.argmax(p)) == g.label for p, g in zip(probs, graphs, strict=True)]))


def train_model(
    model: GraphQA | TextQA,
    train: tuple[Sequence[QuestionGraph], NodeTable | None],
    dev: tuple[Sequence[QuestionGraph], NodeTable | None],
    config: TrainConfig = TrainConfig(),
    log: Callable[[str], None] = print,
    progress: bool = True,
) -> TrainResult:
    """Fit ``model`` on ``train``; keep the weights of the best epoch on ``dev`` (loaded back at the end).
    After the first few batches it says (``log``) how many training steps there are at most and, from
    their measured time, how long they will take (early stopping and ``max_minutes`` may end sooner)."""
    set_seed(config.seed, config.threads)
    graphs, table = train
    labelled = [g for g in graphs if g.label >= 0]
    if not labelled:
        raise ConfigError("train_model: no labelled training questions")
    rng = np.random.default_rng(config.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    R = model.config.num_relations
    with_graph = _with_graph(model)
    start = time.perf_counter()
    best_acc, best_epoch, best_state = -1.0, 0, copy.deepcopy(model.state_dict())
    history: list[dict[str, float]] = []
    stopped = "epochs"
    per_epoch = -(-len(labelled) // config.batch_size)
    total_steps, warmup = config.epochs * per_epoch, min(3, per_epoch)
    for epoch in range(1, config.epochs + 1):
        model.train()
        order = rng.permutation(len(labelled))
        total, seen = 0.0, 0
        steps = range(0, len(order), config.batch_size)
        bar = progress_bar(steps, desc=f"epoch {epoch}", unit="batch", disable=not progress, leave=False)
        timed_out = False
        for s in bar:
            chunk = [labelled[i] for i in order[s : s + config.batch_size]]
            batch = collate(chunk, table, R, with_graph=with_graph)
            loss = torch.nn.functional.cross_entropy(model(batch), batch.labels)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            opt.step()
            total += float(loss.detach()) * len(chunk)
            seen += len(chunk)
            bar.set_postfix(loss=f"{total / seen:.4f}")
            if epoch == 1 and s // config.batch_size + 1 == warmup:
                est = Estimate(total_steps, warmup, time.perf_counter() - start)
                log(f"training: {config.epochs} epochs × {per_epoch} batches at most, "
                    + est.describe("steps") + f" (capped at {duration(config.max_minutes * 60)}; early "
                    "stopping may end sooner; each epoch also scores the dev questions)")
            if time.perf_counter() - start > config.max_minutes * 60:
                timed_out = True
                break
        bar.close()
        dev_acc = evaluate(model, dev[0], dev[1], config.eval_batch_size)
        elapsed = time.perf_counter() - start
        history.append(
            {"epoch": epoch, "train_loss": total / max(seen, 1), "dev_accuracy": dev_acc, "seconds": elapsed}
        )
        log(
            f"epoch {epoch}: train loss {total / max(seen, 1):.4f}, dev accuracy {dev_acc:.4f} "
            f"({elapsed:.0f} s)"
        )
        if dev_acc > best_acc:
            best_acc, best_epoch, best_state = dev_acc, epoch, copy.deepcopy(model.state_dict())
        if timed_out:
            stopped = "time limit"
            break
        if epoch - best_epoch >= config.patience:
            stopped = "early stopping"
            break
    model.load_state_dict(best_state)
    model.eval()
    return TrainResult(best_epoch, best_acc, time.perf_counter() - start, stopped, history)
