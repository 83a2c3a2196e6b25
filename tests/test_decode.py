"""Generation with a KV cache (train/decode.py) against today's uncached generation: the full forward
of the whole prefix each step (Transformer.forward, the model training runs)."""

from __future__ import annotations

import pytest
import torch

from pretrain.plan.shapes import ModelShape
from pretrain.train.init import init_model
from pretrain.train.model import Transformer, generate

SHAPES = {
    "llama_gqa": ModelShape("t", 2, 32, 4, 2, 64, 61, 24),
    "gpt2": ModelShape("g", 2, 32, 4, 4, 128, 61, 24, mlp="gelu", tied_embeddings=True, norm="layernorm",
                       bias=True, learned_pos=True),
}


@pytest.fixture(autouse=True)
def _one_thread(restore_torch_threads):
    """One torch thread: these models are 32 wide, and two threads on a busy 2-core machine spend
    their time in barrier waits (the file took 110 s at load 11). The equalities hold at any count."""
    torch.set_num_threads(1)


def _model(name: str) -> Transformer:
    with torch.device("meta"):
        m = Transformer(SHAPES[name])
    m = init_model(m, "cpu", seed=3).eval()
    with torch.no_grad():  # larger weights than init: sharper, less tie-prone distributions
        for p in m.parameters():
            p.mul_(4.0 if p.dim() > 1 else 1.0)
    return m


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_cached_logits_equal_the_full_forward(name):
    from pretrain.train.decode import Decoder

    m = _model(name)
    rows = [[5, 9, 2, 7, 7, 1], [3, 4], [8] * 24]  # right-padded batch, one row filling the context
    ref = [m(torch.tensor([r]))[0, -1] for r in rows]
    dec = Decoder(m, rows)
    torch.testing.assert_close(dec.logits(), torch.stack(ref), atol=1e-4, rtol=1e-4)
    dec.retain([1, 0])  # row 2 is full; the others take one more token each
    dec.push([11, 12])
    ref = [m(torch.tensor([rows[1] + [11]]))[0, -1], m(torch.tensor([rows[0] + [12]]))[0, -1]]
    torch.testing.assert_close(dec.logits(), torch.stack(ref), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("prompt", [[1], [4, 8, 15, 16, 23, 42], list(range(20)), list(range(30))])
def test_greedy_and_seeded_sampling_equal_uncached(name, prompt):
    """Short prompts, one ending 4 tokens before the context (24) so decoding crosses it, one longer."""
    m = _model(name)
    idx = torch.tensor([prompt])
    for temp, top_k in ((0.0, 0), (1.0, 0), (0.8, 10)):
        a = generate(m, idx, 12, temp, top_k, torch.Generator().manual_seed(7), cache=True)
        b = generate(m, idx, 12, temp, top_k, torch.Generator().manual_seed(7), cache=False)
        assert a.tolist() == b.tolist(), (temp, top_k)


def test_training_forward_is_untouched_by_decoding():
    m = _model("llama_gqa")
    x = torch.tensor([[1, 2, 3, 4, 5]])
    before = m(x)
    generate(m, x, 5, 0.0)
    torch.testing.assert_close(m(x), before, atol=0, rtol=0)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_eval_greedy_generation_with_cache_equals_without(name):
    """The mem: probe's and generate tasks' batched greedy loop: ragged prompts, a stop rule that
    drops rows mid-batch, prompts reaching and passing the context."""
    import dataclasses

    from pretrain.eval.lm import from_module
    from pretrain.eval.scoring import greedy_generate

    m = _model(name)
    ev = from_module(m, list, list, m.shape.seq_len, 0)
    prompts = [[3, 1, 4], [1, 5, 9, 2, 6], [], list(range(22)), list(range(26)), [7] * 10]

    def stop(out):
        return len(out) >= 3 and out[-1] % 3 == 0

    for kw in ({}, {"stop": stop}):
        got = greedy_generate(ev, prompts, 9, batch_size=4, **kw)
        ref = greedy_generate(dataclasses.replace(ev, start_decoding=None), prompts, 9, batch_size=4, **kw)
        assert got == ref
        assert len({tuple(g) for g in got}) > 2  # not a degenerate model that repeats one token


def test_inference_threads_follow_the_run_unless_told(tmp_path, restore_torch_threads, monkeypatch):
    from pretrain.errors import UserError
    from pretrain.eval.lm import use_threads

    (tmp_path / "config.toml").write_text("[train]\nthreads = 1\n")
    torch.set_num_threads(2)
    assert use_threads(tmp_path, None) == 1  # the run's train.threads
    assert use_threads(tmp_path, 2) == 2  # --threads wins
    # not a run (a Hugging Face folder): torch's count less the load the others put on the cores
    # (session 11: 84 s on 2 threads, 13 s on 1, on this busy 2-core machine)
    monkeypatch.setattr("os.getloadavg", lambda: (0.2, 0.0, 0.0))
    assert use_threads(tmp_path / "hf", None) == 2  # an idle machine: torch's default
    monkeypatch.setattr("os.getloadavg", lambda: (9.7, 0.0, 0.0))
    assert use_threads(tmp_path / "hf", None) == 1
    torch.set_num_threads(2)
    (tmp_path / "config.toml").write_text("[train]\nthreads = 0\n")  # a run that left it to torch
    assert use_threads(tmp_path, None) == 1
    with pytest.raises(UserError, match="--threads"):
        use_threads(tmp_path, 0)
