"""Evaluation task files from someone else (red team round 5): what a line carries beside the
fields its kind reads is never held, and every list an example brings is bounded."""

from __future__ import annotations

import gzip
import json
import tracemalloc

import pytest


def _peak_of(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_fields_a_kind_does_not_read_are_not_held_while_the_file_is_read(tmp_path):
    """A line of `{}` values parses to ~24x its bytes of Python objects; 40 such 8 MiB lines (a
    317 KB .gz) held 7.7 GB before, because every parsed record was kept until the file was read.
    Truth: the peak of parsing one such line alone. Reading twelve must stay near one, not twelve."""
    from pretrain.eval.tasks import load_file

    line = json.dumps({"context": "a b", "continuation": " c", "x": [{}] * 60_000}) + "\n"
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(gzip.compress(line.encode() * 12))
    one = _peak_of(lambda: json.loads(line))
    got = {}
    peak = _peak_of(lambda: got.setdefault("task", load_file(p)))
    assert [d["context"] for d in got["task"].docs] == ["a b"] * 12
    assert peak < 3 * one, (peak, one)  # held whole: ~12x


@pytest.mark.parametrize("rec, kind", [
    ({"context": "Q", "answer": "1", "aliases": ["1"] * 1001}, "qa"),
    ({"subject": "s", "question": "q", "choices": ["x"] * 1001, "answer": "A"}, "mmlu"),
])
def test_a_list_past_max_choices_in_any_kind_is_skipped_by_its_reason(tmp_path, rec, kind):
    """`aliases` (each compared with every generation, each a Python string: 4 M in an 8 MiB line,
    40 such lines ran out of 12 GB) and MMLU's choices were not bounded by MAX_CHOICES."""
    from pretrain.eval.tasks import MAX_CHOICES, load_file

    ok = dict(rec)
    key = "aliases" if kind == "qa" else "choices"
    ok[key] = rec[key][:4]
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(rec) + "\n" + json.dumps(ok) + "\n")
    assert len(rec[key]) == MAX_CHOICES + 1
    task = load_file(p, kind=kind)
    assert len(task.docs) == 1 and task.skipped == {"too_many_choices": 1}
    p.write_text(json.dumps({**ok, key: "abcd"}) + "\n" + json.dumps(ok) + "\n")  # not a list
    assert load_file(p, kind=kind).skipped == {"bad_value": 1}


def _eval_model(tok_path, max_length: int):
    """An EvalModel's text side (no network: encode_pair never runs the model)."""
    from pretrain.eval.lm import EvalModel, _tokenizer_functions

    encode, decode, eot = _tokenizer_functions(str(tok_path) if tok_path else "")
    return EvalModel(encode, decode, None, max_length, eot, cut=getattr(encode, "cut", None),
                     encode_after=getattr(encode, "after", None))


def _harness_pair(encode, context: str, continuation: str, need: int):
    """lm-evaluation-harness's split (HFLM._encode_pair), written out on the tokenizer itself, then
    the last `need` ids of each side: all the model reads of (ctx + cont)[-need:][:-1]."""
    n = len(context) - len(context.rstrip())
    if n:
        continuation, context = context[-n:] + continuation, context[:-n]
    whole, ctx = encode(context + continuation), encode(context)
    return ctx[-need:], whole[len(ctx):][-need:]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    """Ours (GPT-2's ByteLevel regex) and Llama-2's SentencePiece shape (a cut's right side is fed
    without its space), trained on WikiText-2; and bytes as tokens (no file)."""
    from pretrain.tokens.tokenizer import EOT, train_tokenizer
    from tests.conftest import data_file
    from tests.tokenizer_families import build

    wiki = data_file("lm/wikitext-2/valid.txt").read_text(encoding="utf-8")
    folder = tmp_path_factory.mktemp("toks")
    ours = train_tokenizer([wiki[:100_000]], vocab_size=1000)
    ours.save(str(folder / "ours.json"))
    llama2 = build("llama2", [wiki[:100_000]], vocab_size=1000)
    llama2.add_special_tokens([EOT])
    llama2.save(str(folder / "llama2.json"))
    return {"wiki": wiki, "paths": {"bytes": None, "ours": folder / "ours.json",
                                    "llama2": folder / "llama2.json"}}


@pytest.mark.parametrize("name", ["bytes", "ours", "llama2"])
def test_a_long_context_is_encoded_through_a_cut_with_the_harness_ids(tokenizers, name):
    """A context past LONG_CONTEXT is encoded as its last TAIL characters with each continuation and
    the rest once, only the window's ids of it: the ids must be the harness's whole-text split for
    any window, a context ending in spaces or in a run with no word end, a long continuation."""
    from pretrain.eval.scoring import LONG_CONTEXT, TAIL, encode_pair
    from pretrain.tokens.tokenizer import load_tokenizer

    path, wiki = tokenizers["paths"][name], tokenizers["wiki"]
    tok = load_tokenizer(path) if path else None  # special strings in text stay text, as eval reads
    encode = (lambda t: tok.encode(t, add_special_tokens=False).ids) if tok else (lambda t: list(t.encode()))
    ctxs = [wiki[:60_000] + "\nAnswer:", wiki[1000:40_000] + " Question: who?  ",
            wiki[:30_000] + "x" * (TAIL + 70_000) + " so", wiki[5:LONG_CONTEXT + 7] + " 中文字符，你好。"]
    conts = [" A", "é" + wiki[:3000]]
    for L in (16, 4096):
        model = _eval_model(path, L)
        assert model.cut is not None
        for j, ctx in enumerate(ctxs):
            memo: dict = {}
            for cont in conts:
                truth = _harness_pair(encode, ctx, cont, L + 1)
                assert encode_pair(model, ctx, cont, memo) == truth, (L, j, cont)


def test_a_thousand_choices_after_a_long_context_encode_the_window_not_the_context(tokenizers):
    """The cost: 1,000 choices after a 1 MB query encoded the query twice per choice (2 GB of text;
    a 4 MB query: 66 s, then a MemoryError at 7.6 GB for one example). Characters handed to the
    tokenizer are counted (no clock): now each choice's TAIL plus the window's share of the query,
    under half the query's own length for all 1,000 together (whole: 2,000 times it)."""
    from pretrain.eval import scoring

    model = _eval_model(tokenizers["paths"]["ours"], 2048)
    seen = [0]

    def counted(f):
        return lambda text, *a: (seen.__setitem__(0, seen[0] + len(text)), f(text, *a))[1]

    model.encode, model.encode_after = counted(model.encode), counted(model.encode_after)
    query = (tokenizers["wiki"] * 40)[:4_000_000]
    memo: dict = {}
    pairs = [scoring.encode_pair(model, query, f" {chr(97 + i % 26)}{i}", memo) for i in range(1000)]
    assert seen[0] < min(len(query) // 2, 1000 * (scoring.TAIL + 100) + 16 * 2049 * 4), seen[0]
    assert {len(ctx) for ctx, _ in pairs} == {2049}


def test_without_an_exact_cut_an_example_past_the_whole_budget_is_skipped_not_encoded(monkeypatch):
    """A tokenizer with no cut rule (a Hugging Face folder's) encodes (context + choice) whole for
    each choice: a 4 MB query with 1,000 choices was 4 G characters to encode (~55 min). Past
    WHOLE_BUDGET characters for one example it is skipped and counted; the characters handed to the
    tokenizer are counted (no clock). With an exact cut the same example is scored."""
    import torch

    from pretrain.eval import harness
    from pretrain.eval.tasks import Task

    monkeypatch.setattr(harness, "WHOLE_BUDGET", 50_000)  # the real one is 16 MiB: a test of seconds
    query = "The answer is hidden in a long text. " * 400  # 14,800 characters
    docs = [{"query": "Short: which?", "choices": ["a", "b"], "gold": 0},
            {"query": query, "choices": [f"c{i}" for i in range(8)], "gold": 1}]  # 8 x 14,800 > 50,000
    task = Task("long", "mc", "long.jsonl", docs)
    model = _eval_model(None, 64)  # bytes as tokens, then the same without its cut: an HF folder's shape
    model.logits = lambda ids, keep=None, *a: torch.zeros(ids.shape[0], ids.shape[1] if keep is None
                                                          else len(keep), 257)
    seen = [0]
    encode = model.encode
    model.encode = lambda text: (seen.__setitem__(0, seen[0] + len(text)), encode(text))[1]
    scored = harness.score_examples(model, task, [0, 1])
    assert [r.get("skipped") for r in scored] == [None, None]  # with the cut, both scored
    model.cut = model.encode_after = None
    seen[0] = 0
    said = harness.score_examples(model, task, [0, 1])
    assert [r.get("skipped") for r in said] == [None, harness.TOO_LONG]
    assert said[0]["lls"] == scored[0]["lls"]  # the short example scored as before
    assert seen[0] < 100, seen[0]  # the long one never reached the tokenizer
