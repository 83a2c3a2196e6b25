"""Mixtures: the lesson's epochs, and a sampler that keeps weights, windows and resume promises."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pretrain.cli import main as cli_main
from pretrain.errors import UserError
from pretrain.tokens import shards
from pretrain.tokens.mixture import (
    BLOCK,
    MixtureSampler,
    block_quotas,
    epochs_per_source,
    permute,
    sampler_from_mixture,
)

SEQ = 8


def make_token_dir(path: Path, n_docs: int, seed: int, sha: str = "same-tok", n_shards: int = 3) -> Path:
    """A token directory in the documented format, written with random documents (ids 1..999)."""
    rng = np.random.default_rng(seed)
    docs = [rng.integers(1, 1000, size=int(rng.integers(1, 40))) for _ in range(n_docs)]
    path.mkdir(parents=True)
    entries = []
    for k, part in enumerate(np.array_split(np.arange(n_docs), n_shards)):
        name = shards.shard_name(k)
        t, n = shards.write_shard(path, name, (docs[i] for i in part), np.dtype("<u2"), 0)
        entries.append({"bin": f"{name}.bin", "idx": f"{name}.idx", "tokens": t, "documents": n})
    shards.write_manifest(path, {
        "dtype": "uint16", "eot_id": 0, "vocab_size": 1000, "tokenizer": {"sha256": sha},
        "tokens": sum(e["tokens"] for e in entries), "documents": n_docs, "shards": entries,
        "sources": {path.name: {"tokens": sum(e["tokens"] for e in entries), "documents": n_docs}}})
    return path


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mix")
    return {"web": make_token_dir(root / "web", 400, 1), "wiki": make_token_dir(root / "wiki", 30, 2),
            "code": make_token_dir(root / "code", 120, 3)}


WEIGHTS = {"web": 0.80, "wiki": 0.05, "code": 0.15}


def stream(s: MixtureSampler, steps: int, batch: int) -> np.ndarray:
    """`steps` batches: array (steps, batch, SEQ + 1)."""
    out = np.empty((steps, batch, SEQ + 1), dtype=np.int64)
    for i in range(steps):
        out[i] = s.next_batch(batch)
    return out


def test_lesson_epochs():
    # The lesson's mixture: 1,000B tokens over web 900B, wiki 20B, code 150B.
    e = epochs_per_source(WEIGHTS, {"web": 900e9, "wiki": 20e9, "code": 150e9}, 1000e9)
    assert {k: round(v, 2) for k, v in e.items()} == {"web": 0.89, "wiki": 2.5, "code": 1.0}


def test_mix_command_prints_epochs_and_warns(dirs, tmp_path, capsys):
    n = {k: int(shards.TokenDir(p).num_tokens) for k, p in dirs.items()}
    budget = 10 * n["wiki"] * 20  # wiki at 0.05 of it: 10 passes, over the 4-pass warning
    toml = "".join(f'[sources.{k}]\npath = "{p}"\nweight = {WEIGHTS[k]}\n' for k, p in dirs.items())
    (tmp_path / "mixture.toml").write_text(f"budget = {budget}\n" + toml)
    assert cli_main(["mix", str(tmp_path / "mixture.toml"), "--json"]) == 0
    rows = {r["source"]: r for r in json.loads(capsys.readouterr().out)["sources"]}
    for k in dirs:
        assert rows[k]["available"] == n[k]
        assert rows[k]["epochs"] == pytest.approx(WEIGHTS[k] * budget / n[k])
    assert rows["wiki"]["epochs"] == pytest.approx(10.0) and rows["wiki"]["warning"]
    assert cli_main(["mix", str(tmp_path / "mixture.toml")]) == 0
    assert "WARNING" in capsys.readouterr().out


@pytest.mark.parametrize("top, web_weight, says", [
    ("budget = -1e8", "0.8", "budget"),
    ("budget = nan", "0.8", "budget"),
    ("budget = inf", "0.8", "budget"),
    ('budget = "x"', "0.8", "budget"),
    ("budget = 1e8\nseq_len = 0", "0.8", "seq_len"),
    ("budget = 1e8\nseq_len = 1.5", "0.8", "seq_len"),
    ('budget = 1e8\nseed = "x"', "0.8", "seed"),
    ("budget = 1e8", "-1", "weight"),
    ("budget = 1e8", "nan", "weight"),
    ("budget = 1e8", "inf", "weight"),
    ("budget = 1e8", '"heavy"', "weight"),
])
def test_a_bad_mixture_file_is_one_line_naming_it(dirs, tmp_path, capsys, top, web_weight, says):
    # Before: a negative budget or weight printed negative epochs, nan/inf printed nan, a string
    # gave a traceback; the sampler refused them, `pretrain mix` did not.
    toml = "".join(f'[sources.{k}]\npath = "{p}"\nweight = {web_weight if k == "web" else WEIGHTS[k]}\n'
                   for k, p in dirs.items())
    (tmp_path / "mixture.toml").write_text(top + "\n" + toml)
    assert cli_main(["mix", str(tmp_path / "mixture.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mixture.toml" in err[0] and says in err[0], err


def test_permutation_is_a_bijection():
    for n in (1, 2, 3, 10, 1000, 4097):
        p = permute(np.arange(n), n, key=42)
        assert sorted(p.tolist()) == list(range(n))
    assert not np.array_equal(permute(np.arange(1000), 1000, 1), permute(np.arange(1000), 1000, 2))


def test_block_quotas_sum_and_round():
    q = block_quotas([0.80, 0.05, 0.15])
    assert q.sum() == BLOCK and np.abs(q - np.array([0.80, 0.05, 0.15]) * BLOCK).max() <= 1


def test_realized_shares_within_one_percent(dirs):
    s = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=7)
    for _ in range(200):
        s.next_batch(1000)  # 200,000 sequences, three blocks and a part
    shares = s.shares()
    for k, w in WEIGHTS.items():
        assert abs(shares[k] - w) < 0.01 * w, (k, shares[k], w)


def _windows(path: Path) -> set[tuple[int, ...]]:
    # Independent truth: the raw files, concatenated, cut every SEQ tokens into SEQ+1 windows.
    man = json.loads((path / "manifest.json").read_text())
    toks = np.concatenate([np.fromfile(path / sh["bin"], dtype="<u2") for sh in man["shards"]])
    toks = toks.astype(np.int64)
    return {tuple(toks[i:i + SEQ + 1]) for i in range(0, toks.size - SEQ, SEQ)}


def test_sequences_are_windows_of_the_sources(dirs):
    windows = {k: _windows(p) for k, p in dirs.items()}
    s = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=3)
    rows = stream(s, 50, 32).reshape(-1, SEQ + 1)
    assert rows.dtype == np.int64 and rows.shape == (1600, SEQ + 1)
    for r in map(tuple, rows):
        assert any(r in w for w in windows.values())


def test_one_epoch_reads_every_window_once(dirs):
    # wiki alone: W windows in the first W draws are all different (a permutation, not sampling).
    s = MixtureSampler({"wiki": dirs["wiki"]}, {"wiki": 1.0}, seq_len=SEQ, seed=5)
    w = int(s.windows[0])
    rows = np.concatenate([s.next_batch(1) for _ in range(w)])
    assert len({tuple(r) for r in rows}) == w == len(_windows(dirs["wiki"]))
    again = np.concatenate([s.next_batch(1) for _ in range(w)])  # second epoch: a new order
    assert {tuple(r) for r in again} == {tuple(r) for r in rows} and not np.array_equal(again, rows)


@pytest.fixture(scope="module")
def uninterrupted(dirs) -> np.ndarray:
    return stream(MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=11), 1500, 4)


@pytest.mark.parametrize("stop", [0, 1, 37, 500])
def test_resume_gives_the_next_1000_batches(dirs, uninterrupted, stop):
    expected = uninterrupted[stop:stop + 1000]
    s = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=11)
    stream(s, stop, 4)
    state = json.loads(json.dumps(s.state_dict()))
    resumed = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=11)
    resumed.load_state_dict(state)
    assert np.array_equal(stream(resumed, 1000, 4), expected)


def test_ranks_split_the_global_batch(dirs):
    single = stream(MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=2), 20, 8)
    ranks = [stream(MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=2, rank=r, world_size=4), 20, 2)
             for r in range(4)]
    assert np.array_equal(np.concatenate(ranks, axis=1), single)


def test_resume_on_a_different_world_size(dirs):
    single = stream(MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=4), 30, 8)
    first = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=4, rank=1, world_size=2)
    stream(first, 10, 4)
    state = first.state_dict()
    assert state == MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=4).state_dict() | {"sequences": 80}
    parts = []
    for r in range(8):  # 2 ranks -> 8 ranks, same global batch of 8
        s = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=4, rank=r, world_size=8)
        s.load_state_dict(state)
        parts.append(stream(s, 20, 1))
    assert np.array_equal(np.concatenate(parts, axis=1), single[10:])


def test_seed_changes_the_stream(dirs):
    a = stream(MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=0), 5, 8)
    b = stream(MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=1), 5, 8)
    assert not np.array_equal(a, b)


def test_refuses_mismatched_state_and_sources(dirs, tmp_path):
    s = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=0)
    other = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=1)
    with pytest.raises(UserError, match="different stream"):
        other.load_state_dict(s.state_dict())
    grown = s.state_dict()
    n = grown["tokens"]["web"]
    grown["tokens"]["web"] += 1  # the source was re-tokenized since: its windows moved
    with pytest.raises(UserError, match="different stream") as e:
        s.load_state_dict(grown)
    # which source changed and how, and what to do; not two dicts of the sampler's state to compare
    assert f"(tokens.web {n + 1} -> {n}); " in str(e.value) and "another train.out" in str(e.value)
    odd = make_token_dir(tmp_path / "odd", 10, 9, sha="another-tokenizer")
    with pytest.raises(UserError, match="different tokenizers"):
        MixtureSampler({"web": dirs["web"], "odd": odd}, {"web": 0.5, "odd": 0.5}, seq_len=SEQ)
    tiny = make_token_dir(tmp_path / "tiny", 1, 9, n_shards=1)
    with pytest.raises(UserError, match="fewer than one sequence"):
        MixtureSampler({"tiny": tiny}, {"tiny": 1.0}, seq_len=4096)
    with pytest.raises(UserError, match="name different sources"):
        MixtureSampler(dirs, {"web": 1.0}, seq_len=SEQ)


@pytest.mark.parametrize("position", [-5, 1.5, True, "abc", None, 10**30])
def test_refuses_a_state_with_an_impossible_position(dirs, position):
    # A sampler state travels in a checkpoint from someone else: -5 was accepted (and sampled),
    # 1.5 and True read as 1, the rest raised ValueError/TypeError/OverflowError.
    s = MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=0)
    state = dict(s.state_dict(), sequences=position)
    with pytest.raises(UserError, match="sequences"):
        s.load_state_dict(state)
    s.load_state_dict(dict(state, sequences=12))
    assert s.position == 12


def test_sampler_from_mixture_file(dirs, tmp_path):
    toml = "".join(f'[sources.{k}]\npath = "{p}"\nweight = {WEIGHTS[k]}\n' for k, p in dirs.items())
    (tmp_path / "m.toml").write_text(f"budget = 1e9\nseq_len = {SEQ}\nseed = 9\n" + toml)
    a = stream(sampler_from_mixture(tmp_path / "m.toml"), 5, 4)
    b = stream(MixtureSampler(dirs, WEIGHTS, seq_len=SEQ, seed=9), 5, 4)
    assert np.array_equal(a, b)


def test_a_source_without_tokens_is_refused_as_the_sampler_refuses_it(dirs, tmp_path, capsys):
    # `pretrain mix` printed "inf" epochs and an over-4-epochs warning for a source of 0 tokens (a
    # tokenize run that read no document), exit 0, and --json wrote "inf"; training it is refused.
    empty = make_token_dir(tmp_path / "empty", 0, 4)
    (tmp_path / "mixture.toml").write_text(f'budget = 1e5\nseq_len = {SEQ}\n'
                                           f'[sources.web]\npath = "{dirs["web"]}"\nweight = 0.9\n'
                                           f'[sources.empty]\npath = "{empty}"\nweight = 0.1\n')
    with pytest.raises(UserError, match="'empty'"):
        sampler_from_mixture(tmp_path / "mixture.toml")
    for extra in ([], ["--json"]):
        assert cli_main(["mix", str(tmp_path / "mixture.toml"), *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1, (out, err)
        assert "'empty'" in err and "no tokens" in err and str(empty) in err, err


def test_report_of_a_mixture_toml_says_how_to_report_it(dirs, tmp_path, capsys):
    # The report draws `pretrain mix --json` output; given the mixture.toml itself it said "not a
    # curate output, token directory, mixture or plan JSON, ...", no word of how to get the JSON.
    toml = "".join(f'[sources.{k}]\npath = "{p}"\nweight = {WEIGHTS[k]}\n' for k, p in dirs.items())
    (tmp_path / "mixture.toml").write_text("budget = 1e6\n" + toml)
    assert cli_main(["report", str(tmp_path / "mixture.toml"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pretrain mix" in err and "--json" in err, err
    assert cli_main(["mix", str(tmp_path / "mixture.toml"), "--json"]) == 0
    (tmp_path / "mix.json").write_text(capsys.readouterr().out)
    assert cli_main(["report", str(tmp_path / "mix.json"), "-o", str(tmp_path / "r.html")]) == 0


def test_a_typo_in_a_source_path_says_not_found(dirs, tmp_path, capsys):
    # A path that does not exist was "no manifest.json; is this a directory written by `pretrain
    # tokenize`?", as for a folder of something else: a typo read as a format question.
    (tmp_path / "mixture.toml").write_text(f'budget = 1e5\n[sources.web]\npath = "{dirs["web"]}x"\n'
                                           'weight = 1\n')
    assert cli_main(["mix", str(tmp_path / "mixture.toml")]) == 2
    err = capsys.readouterr().err
    assert f"source 'web': {dirs['web']}x: not found" in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(UserError, match=f"source 'web': {dirs['web']}x: not found"):  # train's sampler
        sampler_from_mixture(tmp_path / "mixture.toml")


def test_a_source_given_twice_is_refused(dirs, tmp_path, capsys):
    # Run-it-twice review: the same token directory under two names (`web` and `./web/`, or a link
    # to it) was taken as two corpora: `mix` showed half the epochs it reads, and the sampler drew
    # the same windows independently at both weights. Refused, naming both and the way on.
    (tmp_path / "link").symlink_to(dirs["web"])
    for other in (f"{dirs['web']}/", f"{dirs['web']}/../web", str(tmp_path / "link")):
        (tmp_path / "m.toml").write_text(f'budget = 1e5\nseq_len = {SEQ}\n'
                                         f'[sources.web]\npath = "{dirs["web"]}"\nweight = 0.5\n'
                                         f'[sources.again]\npath = "{other}"\nweight = 0.25\n')
        assert cli_main(["mix", str(tmp_path / "m.toml")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "'again'" in err[0] and "'web'" in err[0] and "m.toml" in err[0], err
        with pytest.raises(UserError, match="same token directory"):
            sampler_from_mixture(tmp_path / "m.toml")
    with pytest.raises(UserError, match="same token directory"):  # train's data.sources
        MixtureSampler({"a": dirs["web"], "b": tmp_path / ".." / tmp_path.name / "link"},
                       {"a": 1, "b": 1}, seq_len=SEQ)


def test_the_training_log_says_the_epochs_of_each_source(dirs, tmp_path):
    # Run-it-twice review: `pretrain train` on token sources printed tokens/step and steps, never
    # how many passes that made over each source (only `pretrain mix` did, for a budget typed by
    # hand). The summary's data line: weight, tokens, epochs per source, flagged past 4 epochs.
    import re

    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    steps, weights = 300, {"web": 0.8, "wiki": 0.2}
    cfg = tiny_config(tmp_path / "run", "", "data.kind=tokens", "model.vocab_size=1000",
                      f'data.sources={{web="{dirs["web"]}",wiki="{dirs["wiki"]}"}}',
                      "data.weights={web=4,wiki=1}", f"train.steps={steps}",  # 4:1 = 0.8:0.2
                      f'data.eval_sources={{held="{dirs["code"]}",again="{dirs["wiki"]}/"}}')
    summary = Trainer(cfg, quiet=True).summary()
    line = next(ln for ln in summary.splitlines() if ln.startswith("data:"))
    # an eval source that is a training source's directory: its loss is not held-out
    assert "WARNING: eval source is a training source (again = wiki)" in summary, summary
    said = {k: (float(w), int(n.replace(",", "")), float(e)) for k, w, n, e in
            re.findall(r"(\w+) ([\d.]+) of ([\d,]+) tokens = ([\d.]+) epochs", line)}
    # Truth: a sampler actually drawing the run's sequences (4 x 32 per step), each draw counted.
    s = MixtureSampler({k: dirs[k] for k in weights}, weights, seq_len=32, seed=cfg.data.seed)
    for _ in range(steps):
        s.next_batch(cfg.data.batch_size)
    for k, w in weights.items():
        n = shards.TokenDir(dirs[k]).num_tokens
        drawn = s.shares()[k] * s.position
        assert said[k][:2] == (w, n)
        assert said[k][2] == pytest.approx(drawn / ((n - 1) // 32), abs=0.006)
    assert ("WARNING: wiki over 4 epochs" in line) == (said["wiki"][2] > 4) and said["wiki"][2] > 4
    assert "web over" not in line
    # a source read more than once, under the warning, is said so (as `pretrain mix` says it)
    marked = dict(re.findall(r"(\w+) [\d.]+ of [\d,]+ tokens = [\d.]+ epochs( \(repeated\))?", line))
    assert {k: bool(v) for k, v in marked.items()} == {k: 1 < e <= 4 for k, (_, _, e) in said.items()}, line
    # log.eval_every without any held-out source measured nothing, in silence (session 10's
    # end-to-end walk): the summary says so; with eval sources (above) it does not
    assert "no eval loss" not in summary
    bare = tiny_config(tmp_path / "bare", "", "data.kind=tokens", "model.vocab_size=1000",
                       f'data.sources={{web="{dirs["web"]}"}}', "log.eval_every=5")
    assert ("WARNING: log.eval_every = 5 but data.eval_sources is empty" in
            Trainer(bare, quiet=True).summary())


def test_the_run_report_says_the_epochs_too(dirs, tmp_path):
    # The run's metrics.jsonl keeps the summary's numbers (a `data` event), so `pretrain report RUN`
    # says them, and lists a source read more than 4 times among the run's problems.
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    tiny = make_token_dir(tmp_path / "tiny", 3, 3, n_shards=1)  # 53 tokens: one window of 33
    run = tmp_path / "run"
    cfg = tiny_config(run, "", "data.kind=tokens", "model.vocab_size=1000", "train.steps=3",
                      f'data.sources={{web="{dirs["web"]}",tiny="{tiny}"}}', "data.weights={web=1,tiny=1}")
    t = Trainer(cfg, quiet=True)
    t.fit()
    events = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"event"' in x]
    data = [e for e in events if e["event"] == "data"]
    assert len(data) == 1 and data[0]["step"] == 0
    tiny_epochs = data[0]["sources"]["tiny"]["epochs"]
    assert tiny_epochs == t.loader.inner.shares()["tiny"] * t.loader.inner.position / (
        (shards.TokenDir(tiny).num_tokens - 1) // 32) > 4  # what the run actually drew
    assert cli_main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert f"tiny 0.500 of {shards.TokenDir(tiny).num_tokens:,} tokens = {tiny_epochs:.2f} epochs" in page
    assert f"tiny: {tiny_epochs:.2f} epochs of its data in this run" in page
    assert "final eval loss: none" not in page  # log.eval_every = 0 asked for none
    # log.eval_every without held-out data: the page says why the card is empty (session 10)
    Trainer(tiny_config(tmp_path / "run2", "", "data.kind=tokens", "model.vocab_size=1000", "train.steps=1",
                        f'data.sources={{web="{dirs["web"]}"}}', "log.eval_every=1"), quiet=True).fit()
    assert cli_main(["report", str(tmp_path / "run2"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "final eval loss: none, though log.eval_every = 1: the run had no held-out data" in page


def test_a_run_read_from_another_directory_names_its_relative_token_folder(dirs, tmp_path, monkeypatch,
                                                                          capsys):
    # `pretrain sample demo-out/run` works from where the demo ran (the tokenizer is found beside the
    # run's token folder); from another directory it said only "pass the tokenizer.json" (session 11),
    # export "no tokenizer.json in demo-out/tokens/web".
    import shutil

    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    shutil.copytree(dirs["web"], tmp_path / "tokens")
    (tmp_path / "x.txt").write_text("some held-out text\n")
    monkeypatch.chdir(tmp_path)
    Trainer(tiny_config(tmp_path / "run", "", "data.kind=tokens", "model.vocab_size=1000", "train.steps=1",
                        'data.sources={web="tokens"}', "checkpoint.every=1"), quiet=True).fit()
    for argv in (["sample", str(tmp_path / "run"), "--tokens", "1"],
                 ["eval", str(tmp_path / "run"), "--tasks", f"ppl:{tmp_path / 'x.txt'}"],
                 ["export", str(tmp_path / "run"), "--format", "hf", "-o", str(tmp_path / "hf")]):
        monkeypatch.chdir(tmp_path)  # here the folder is found: no word about it (it has no tokenizer copy)
        assert cli_main(argv) == 2
        assert "not found from" not in capsys.readouterr().err
        (tmp_path / "elsewhere").mkdir(exist_ok=True)
        monkeypatch.chdir(tmp_path / "elsewhere")
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert f"its token folder tokens is not found from {tmp_path / 'elsewhere'}" in err, err


@pytest.mark.parametrize("budget, tokens", [('"1T"', 1e12), ('"2.5M"', 2.5e6), ('"140e9"', 140e9),
                                            ("2e6", 2e6)])
def test_a_budget_is_read_as_the_planner_reads_a_count(dirs, tmp_path, budget, tokens):
    # `budget = "2M"` was refused ("must be a positive token count") while `plan --tokens 2M` took it
    from pretrain.plan.shapes import parse_count
    from pretrain.tokens.mixture import load_mixture

    web = dirs["web"]
    (tmp_path / "m.toml").write_text(f'budget = {budget}\n[sources.web]\npath = "{web}"\nweight = 1\n')
    assert load_mixture(tmp_path / "m.toml").budget == tokens == parse_count(budget.strip('"'))


def test_weights_that_do_not_sum_to_one_are_said_normalized(dirs, tmp_path, capsys):
    # Weights 3 and 1 printed 0.750 and 0.250 with no word that they were divided by 4.
    (tmp_path / "m.toml").write_text(f'budget = 1e5\n[sources.web]\npath = "{dirs["web"]}"\nweight = 3\n'
                                     f'[sources.wiki]\npath = "{dirs["wiki"]}"\nweight = 1\n')
    assert cli_main(["mix", str(tmp_path / "m.toml")]) == 0
    out = capsys.readouterr().out
    assert "weights sum to 4, not 1: each source's share is its weight / 4" in out, out
    assert cli_main(["mix", str(tmp_path / "m.toml"), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["weights_sum"] == 4 and [r["weight"] for r in said["sources"]] == [0.75, 0.25]
    (tmp_path / "m.toml").write_text(f'budget = 1e5\n[sources.web]\npath = "{dirs["web"]}"\nweight = 0.7\n'
                                     f'[sources.wiki]\npath = "{dirs["wiki"]}"\nweight = 0.3\n')
    assert cli_main(["mix", str(tmp_path / "m.toml")]) == 0
    assert "sum to" not in capsys.readouterr().out  # 0.7 + 0.3 is 1 (to rounding)


def test_a_source_shorter_than_one_sequence_is_refused_as_the_sampler_refuses_it(dirs, tmp_path, capsys):
    # Run-it-twice review (S4): a source of 8 tokens under `seq_len = 256` printed 25,000 epochs and
    # exit 0; the sampler built from the same file refuses it (no window of seq_len + 1 tokens).
    short = make_token_dir(tmp_path / "short", 1, 5, n_shards=1)
    n = shards.TokenDir(short).num_tokens
    (tmp_path / "m.toml").write_text(f'budget = 1e5\nseq_len = {n}\n'
                                     f'[sources.web]\npath = "{dirs["web"]}"\nweight = 0.9\n'
                                     f'[sources.short]\npath = "{short}"\nweight = 0.1\n')
    with pytest.raises(UserError, match="'short'"):
        sampler_from_mixture(tmp_path / "m.toml")
    assert cli_main(["mix", str(tmp_path / "m.toml")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, (out, err)
    assert "'short'" in err and f"seq_len = {n}" in err and f"{n} tokens" in err, err
    (tmp_path / "m.toml").write_text(f'budget = 1e5\nseq_len = {n - 1}\n'  # one window: taken by both
                                     f'[sources.web]\npath = "{dirs["web"]}"\nweight = 0.9\n'
                                     f'[sources.short]\npath = "{short}"\nweight = 0.1\n')
    sampler_from_mixture(tmp_path / "m.toml")
    assert cli_main(["mix", str(tmp_path / "m.toml")]) == 0


def test_a_source_read_more_than_once_is_said_below_the_warning(dirs, tmp_path, capsys):
    # Run-it-twice review (S4): a source drawn 1.5 times (its weight asks more tokens than it
    # holds) was only a number in the epochs column; a newcomer read nothing about repetition
    # until the 4-epoch warning. Truth: w_i * D / N_i, the lesson's formula.
    weights = {"web": 0.5, "wiki": 0.3, "code": 0.2}
    n = {k: int(shards.TokenDir(p).num_tokens) for k, p in dirs.items()}
    budget = 1.5 * n["wiki"] / weights["wiki"]  # wiki: 1.5 passes
    truth = {k: weights[k] * budget / n[k] > 1 for k in n}
    assert truth == {"web": False, "wiki": True, "code": False}  # the fixture's sizes allow it
    toml = "".join(f'[sources.{k}]\npath = "{p}"\nweight = {weights[k]}\n' for k, p in dirs.items())
    (tmp_path / "mixture.toml").write_text(f"budget = {budget}\n" + toml)
    assert cli_main(["mix", str(tmp_path / "mixture.toml"), "--json"]) == 0
    rows = {r["source"]: r for r in json.loads(capsys.readouterr().out)["sources"]}
    assert {k: r["repeated"] for k, r in rows.items()} == truth and not rows["wiki"]["warning"]
    assert cli_main(["mix", str(tmp_path / "mixture.toml")]) == 0
    out = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.split() and ln.split()[0] in n}
    assert {k: "repeated" in ln for k, ln in lines.items()} == truth and "WARNING" not in out, out
    assert "drawn 1.5 times" in lines["wiki"], out


_LOGGED_RUN = '''
import hashlib, json, sys
from pretrain.tokens import mixture

def log_batches(path, hold_at=0):
    """Each next_batch call's first global sequence and one id per row (its window's bytes); with
    `hold_at`, the process waits there (to be killed) after logging that many calls."""
    import time
    inner, log = mixture.MixtureSampler.next_batch, open(path, "a")

    def next_batch(self, n):
        g, out = self.position, inner(self, n)
        log.write(json.dumps([g, [hashlib.sha1(r.tobytes()).hexdigest()[:12] for r in out]]) + "\\n")
        log.flush()
        if hold_at and g // n + 1 >= hold_at:
            time.sleep(600)
        return out
    mixture.MixtureSampler.next_batch = next_batch

if __name__ == "__main__":
    log_batches(sys.argv[1], int(sys.argv[2]))
    from pretrain.cli import main
    sys.exit(main(sys.argv[3:]))
'''


@pytest.mark.slow
def test_sigkill_in_training_then_resume_draws_the_uninterrupted_sequences(dirs, tmp_path, monkeypatch):
    # The brief's check (S4): a `pretrain train` on token sources killed in a random step, then
    # resumed from its last checkpoint, trains on exactly the sequences of a run that never stopped:
    # none repeated, none skipped. Truth: the sampler of the same config drawing 30 batches unstopped.
    import os
    import random
    import signal
    import subprocess
    import sys
    import time

    from pretrain import config as cfgmod
    from pretrain.train.metrics import read_metrics
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    (tmp_path / "logged_run.py").write_text(_LOGGED_RUN)
    monkeypatch.syspath_prepend(str(tmp_path))
    import logged_run

    next_batch = MixtureSampler.next_batch
    monkeypatch.setattr(MixtureSampler, "next_batch", next_batch)  # the unlogged one, restored at the end

    def cfg(run):
        return tiny_config(run, "", "data.kind=tokens", "model.vocab_size=1000", "train.steps=30",
                           f'data.sources={{web="{dirs["web"]}",wiki="{dirs["wiki"]}"}}',
                           "data.weights={web=4,wiki=1}", "checkpoint.every=4",
                           "checkpoint.async_save=false")  # saved before the next step: a known resume point

    def read(log):
        return [json.loads(ln) for ln in log.read_text().splitlines()]

    # Truth: the sampler the config describes, drawing 30 batches without a stop (one per step)
    batch = cfg(tmp_path).data.batch_size
    logged_run.log_batches(tmp_path / "ref.log")  # undone by monkeypatch
    ref_sampler = MixtureSampler({k: dirs[k] for k in ("web", "wiki")}, {"web": 4, "wiki": 1}, seq_len=32,
                                 seed=cfg(tmp_path).data.seed)
    for _ in range(30):
        ref_sampler.next_batch(batch)
    ref = read(tmp_path / "ref.log")
    # wiki is read past its first epoch (1.4 passes), and the resumed part (from step 24 at the latest)
    # draws wiki's second epoch's windows: a resume that restarted a source's epochs would fail too
    epochs = ref_sampler.epochs_after
    assert epochs(30 * batch)["wiki"] > max(1.0, epochs(24 * batch)["wiki"])

    run = tmp_path / "run"
    (tmp_path / "cfg.toml").write_text(cfgmod.dumps(cfg(run)))
    kill_at = random.Random().randint(5, 25)  # a step past the first checkpoint, before the end
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(tmp_path / "logged_run.py"), str(tmp_path / "killed.log"), str(kill_at),
            "train", str(tmp_path / "cfg.toml"), "--quiet"]
    with open(tmp_path / "killed.err", "wb") as err:  # the run holds in its kill_at-th batch, killed there
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            log = tmp_path / "killed.log"
            if log.exists() and log.read_text().count("\n") >= kill_at:
                break
            time.sleep(0.02)
        assert proc.poll() is None, (tmp_path / "killed.err").read_text()[-2000:]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    killed = read(tmp_path / "killed.log")
    MixtureSampler.next_batch = next_batch  # logged afresh into resumed.log (not also into ref.log)
    logged_run.log_batches(tmp_path / "resumed.log")
    t = Trainer(cfg(run), quiet=True)
    start = t.step  # the last checkpoint's step
    assert start == (kill_at - 1) // 4 * 4  # the last checkpoint before the held step
    t.fit()
    resumed = read(tmp_path / "resumed.log")
    assert resumed[0][0] == start * batch  # resumed at the checkpoint's position, not at 0
    # the killed run's draws up to its checkpoint, then the resumed run's: the uninterrupted stream
    assert killed[:start] == ref[:start] and [*killed[:start], *resumed] == ref
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")[0]] == list(range(1, 31))  # one per step


def test_a_source_of_weight_zero_and_no_tokens_is_read_zero_times(dirs, tmp_path, capsys):
    # Run-it-twice review (S4): a source switched off (weight 0) whose directory holds no token showed
    # "inf" epochs and the over-4-epochs WARNING (`--json`: "epochs": "inf"); nothing is drawn from
    # it, as the sampler's own count says (epochs_after: weight 0 gives 0).
    empty = make_token_dir(tmp_path / "empty", 0, 4)
    assert epochs_per_source({"web": 1.0, "empty": 0.0}, {"web": 100, "empty": 0}, 1000) == \
        {"web": 10.0, "empty": 0.0}
    s = MixtureSampler({"web": dirs["web"], "empty": empty}, {"web": 1, "empty": 0}, seq_len=SEQ)
    assert s.epochs_after(1000)["empty"] == 0.0
    (tmp_path / "m.toml").write_text(f'budget = 1e5\n[sources.web]\npath = "{dirs["web"]}"\nweight = 1\n'
                                     f'[sources.empty]\npath = "{empty}"\nweight = 0\n')
    assert cli_main(["mix", str(tmp_path / "m.toml"), "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out)["sources"] if r["source"] == "empty")
    assert (row["epochs"], row["repeated"], row["warning"]) == (0.0, False, False), row


def test_an_unknown_key_in_a_source_is_named(dirs, tmp_path, capsys):
    # newcomer sweep (session 13): `weigth = 1` said only "needs `path` and `weight`", and a key
    # beside both (`epochs = 2`) was read by no one, in silence; the file's top level already named one
    for extra in ('weigth = 1', 'weight = 1\nepochs = 2'):
        source = f'[sources.web]\npath = "{dirs["web"]}"\n{extra}\n'
        (tmp_path / "mixture.toml").write_text(f"budget = 1e5\n{source}")
        assert cli_main(["mix", str(tmp_path / "mixture.toml")]) == 2
        key = extra.split("\n")[-1].split(" =")[0]
        err = capsys.readouterr().err
        assert f"source 'web': unknown key '{key}'; known: path, weight" in err, err


def test_mix_says_the_train_options_of_its_mixture_and_the_trainer_takes_them(dirs, tmp_path, capsys,
                                                                           monkeypatch):
    """`pretrain mix` ends with the `--set` options that train on the file: run as printed (from the
    folder they were printed in) beside the shipped recipe, the trainer's summary draws each source
    at the file's weight, and the vocabulary fits the tokens (the manifests say 1000)."""
    import re
    import shlex

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "m.toml").write_text(
        f'budget = 1e5\nseq_len = 16\nseed = 3\n[sources.web]\npath = "{dirs["web"]}"\nweight = 3\n'
        f'[sources.wiki]\npath = "{dirs["wiki"]}"\nweight = 1\n')
    monkeypatch.chdir(tmp_path)
    assert cli_main(["mix", "m.toml"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("train on it: "))
    argv = shlex.split(line.removeprefix("train on it: pretrain "))
    sets = dict(argv[i + 1].split("=", 1) for i, w in enumerate(argv) if w == "--set")
    assert sets == {"data.kind": "tokens", "data.sources.web": str(dirs["web"]), "data.weights.web": "3",
                    "data.sources.wiki": str(dirs["wiki"]), "data.weights.wiki": "1",
                    "model.vocab_size": "1000", "model.seq_len": "16", "data.seed": "3"}
    argv[argv.index("RECIPE.toml")] = str(root / "recipes" / "tiny-cpu.toml")
    assert cli_main([*argv, "--set", "train.out=run", "--set", "log.eval_every=0", "--dry-run"]) == 0
    summary = capsys.readouterr().err
    assert re.search(r"data: web 0\.750 of [\d,]+ tokens = .*wiki 0\.250 of", summary), summary


def test_a_refused_run_says_only_why_not_where_its_config_would_be(dirs, tmp_path, capsys):
    """The settings echo came first and named `(full config: RUN/config.toml)`, a file the refused
    run never wrote (session 14 sweep): the refusal is now the one line, and nothing is created."""
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "tiny-cpu.toml"
    run = tmp_path / "run"
    argv = ["train", str(recipe), "--set", "data.kind=tokens", "--set", f"data.sources.web={dirs['web']}",
            "--set", f"train.out={run}", "--set", "train.steps=1"]
    assert cli_main(argv) == 2  # the tokens' vocabulary (1000) is over tiny-cpu's 257
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "model.vocab_size=1000 (or more)" in err, err
    assert not run.exists()
