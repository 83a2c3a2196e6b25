"""Which requests share a packed row (`scoring.tree_rows`): rolling `ppl:` windows never (they share
a one-token context), a multiple-choice question and its answers do, no row outgrows ROW_WIDTH
windows; and the scores equal each request scored alone by the plain definition."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pretrain.eval import scoring
from pretrain.eval.lm import from_module
from pretrain.eval.perplexity import rolling_requests
from pretrain.plan.shapes import ModelShape
from pretrain.train.init import init_model
from pretrain.train.model import Transformer

L = 24  # the model's window
VOCAB = 61


@pytest.fixture(autouse=True)
def _one_thread(restore_torch_threads):
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model():
    with torch.device("meta"):
        m = Transformer(ModelShape("t", 2, 32, 4, 2, 64, VOCAB, L))
    m = init_model(m, "cpu", seed=3).eval()
    return from_module(m, list, list, L, 0)


def _watch(model):
    """The model with tree_logits recording each packed row's width (its non-padding tokens: a
    padding position sees only itself, so its mask row has one True)."""
    widths: list[int] = []

    def tree(ids, pos, mask, keep=None):
        widths.extend(int((mask[b].sum(-1) > 1).sum()) + 1 for b in range(ids.shape[0]))
        return model.tree_logits(ids, pos, mask, keep)

    return dataclasses.replace(model, tree_logits=tree), widths


def _alone(model, req):
    """(log-likelihood, greedy) of one request by the definition: one causal forward of
    (ctx + cont)[-(L + 1):][:-1], log_softmax at the continuation's positions."""
    ctx, cont = req
    seq = torch.tensor([(ctx + cont)[-(L + 1):]])
    logp = model.logits(seq[:, :-1])[0].float().log_softmax(-1)[-len(cont):]
    tgt = torch.tensor(cont[-len(logp):])
    return logp[torch.arange(len(tgt)), tgt].sum().item(), bool((logp.argmax(-1) == tgt).all())


def _check_against_alone(model, reqs, got):
    for req, (ll, greedy) in zip(reqs, got):
        ref, ref_greedy = _alone(model, req)
        assert ll == pytest.approx(ref, abs=1e-4)
        assert greedy == ref_greedy


def test_rolling_windows_are_scored_unpacked(model):
    """A text of 5 distinct tokens: its 40 windows share 5 one-token contexts (8 per context);
    the rule before session 14 packed each context's 8 windows into a row 8 windows wide."""
    gen = torch.Generator().manual_seed(0)
    ids = (torch.randint(1, 6, (40 * L,), generator=gen)).tolist()
    reqs = rolling_requests(ids, L, 0)
    assert len({tuple(c) for c, _ in reqs}) < len(reqs) - 30  # contexts repeat: packing was possible
    watched, widths = _watch(model)
    got = scoring.loglikelihood_tokens(watched, reqs, batch_tokens=4 * L)
    assert widths == []
    _check_against_alone(model, reqs, got)


def test_questions_with_shorter_answers_share_a_row(model):
    """Contexts of 12 tokens, 3 answers of 4-7 tokens each: one row per question, as wide as the
    context plus each answer but its last token."""
    gen = torch.Generator().manual_seed(1)
    reqs, want = [], []
    for q in range(6):
        ctx = torch.randint(1, VOCAB, (12,), generator=gen).tolist()
        conts = [torch.randint(1, VOCAB, (4 + (q + a) % 4,), generator=gen).tolist() for a in range(3)]
        reqs += [(ctx, c) for c in conts]
        want.append(12 + sum(len(c) - 1 for c in conts))
    watched, widths = _watch(model)
    got = scoring.loglikelihood_tokens(watched, reqs, batch_tokens=4 * L)
    assert sorted(widths) == sorted(want)
    _check_against_alone(model, reqs, got)


def test_many_answers_fill_rows_of_at_most_row_width_windows(model):
    """One context of 10 tokens with 30 answers of 6 tokens: rows of (2 x 25 - 10) // 5 = 8
    answers (10 + 8 x 5 = 50 tokens), the last of the 6 left over; an answer with a context
    shorter than half of it (2 tokens, 6-token answers) is not packed."""
    gen = torch.Generator().manual_seed(2)
    ctx = torch.randint(1, VOCAB, (10,), generator=gen).tolist()
    short = torch.randint(1, VOCAB, (2,), generator=gen).tolist()
    conts = [torch.randint(1, VOCAB, (6,), generator=gen).tolist() for _ in range(30)]
    reqs = [(ctx, c) for c in conts] + [(short, c) for c in conts[:3]]
    assert scoring.tree_rows(10, [6] * 30, list(range(30)), L) == [list(range(s, min(s + 8, 30)))
                                                                    for s in range(0, 30, 8)]
    assert scoring.tree_rows(2, [6] * 3, [30, 31, 32], L) == []
    watched, widths = _watch(model)
    got = scoring.loglikelihood_tokens(watched, reqs, batch_tokens=4 * L)
    assert sorted(widths) == [10 + 6 * 5] + [10 + 8 * 5] * 3
    assert max(widths) <= scoring.ROW_WIDTH * (L + 1)
    _check_against_alone(model, reqs, got)
