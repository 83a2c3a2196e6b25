"""The tokens pipeline run twice as a user would (session 13 sweep): what a newcomer tripped on,
each checked against the files themselves. In-process, a tokenizer of 300 ids; ~2 s."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pretrain.cli import main
from pretrain.errors import UserError

TEXT = "The quick brown fox jumps over the lazy dog. " * 40


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tok")
    (root / "train.txt").write_text(TEXT)
    assert main(["tokenizer", "train", str(root / "train.txt"), "-o", str(root / "tok.json"),
                 "--vocab-size", "300"]) == 0
    return root / "tok.json"


def _one_line(capsys, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


def test_a_text_field_for_plain_text_only_is_refused_before_any_work(tok, tmp_path, capsys):
    """`--text-field content` over .txt files was dropped in silence: the argparse default "text"
    hid whether it was given. Refused now, naming it, and nothing is written."""
    (tmp_path / "a.txt").write_text("one document")
    (tmp_path / "b.txt").write_text("another one")
    capsys.readouterr()
    assert main(["tokenizer", "train", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"),
                 "-o", str(tmp_path / "t.json"), "--vocab-size", "300", "--text-field", "content"]) == 2
    _one_line(capsys, "--text-field content", "2 input files (.txt)", "drop --text-field")
    assert not (tmp_path / "t.json").exists()
    assert main(["tokenize", str(tmp_path / "a.txt"), "--tokenizer", str(tok), "-o", str(tmp_path / "out"),
                 "--text-field", "content"]) == 2
    _one_line(capsys, "--text-field content", "the input file (.txt) has no fields")
    assert not (tmp_path / "out").exists()


def test_curate_jobs_refuse_a_text_field_for_plain_text_only_and_read_it_beside_jsonl(tmp_path, capsys):
    """The same for curate, dedup and decontaminate: over .txt files `--text-field content` ran,
    exited 0 and said nothing of it. Refused before OUT exists; with a JSONL beside them the field is
    read there (its document kept by its content) and the .txt read whole."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("one document of plain text")
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"text": "nothing in common with the inputs at all"}) + "\n")
    for cmd in (["curate"], ["dedup"], ["decontaminate", "--benchmarks", str(bench)]):
        capsys.readouterr()
        out = tmp_path / f"out-{cmd[0]}"
        assert main([cmd[0], str(tmp_path / "in"), "-o", str(out), "--text-field", "content", "--workers",
                     "1", "--quiet", *cmd[1:]]) == 2
        _one_line(capsys, "--text-field content", "the input file (.txt) has no fields")
        assert not out.exists()
    (tmp_path / "in" / "c.jsonl").write_text(json.dumps({"id": "c", "content": "a fox in a field"}) + "\n")
    out = tmp_path / "dedup"
    assert main(["dedup", str(tmp_path / "in"), "-o", str(out), "--text-field", "content", "--workers", "1",
                 "--quiet"]) == 0
    import zstandard

    texts = sorted(json.loads(line)["text"] for f in (out / "data").iterdir()
                   for line in zstandard.ZstdDecompressor().decompress(f.read_bytes(),
                                                                        max_output_size=1 << 20).splitlines())
    assert texts == ["a fox in a field", "one document of plain text"]


def test_a_text_field_applies_where_an_input_has_fields(tok, tmp_path, capsys):
    """With one JSONL among .txt files, the field is read there, and the .txt read whole. Truth:
    the tokenizer's own encoding of each file's text, + end-of-text."""
    from pretrain.tokens.tokenizer import eot_id, load_tokenizer

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.jsonl").write_text(json.dumps({"content": "a fox", "text": "not this"}) + "\n")
    (tmp_path / "c" / "b.txt").write_text("a lazy dog")
    assert main(["tokenize", str(tmp_path / "c"), "--tokenizer", str(tok), "-o", str(tmp_path / "t"),
                 "--text-field", "content", "--workers", "1"]) == 0
    t = load_tokenizer(tok)
    for k, text in enumerate(["a fox", "a lazy dog"]):
        ids = np.fromfile(tmp_path / "t" / f"shard_{k:05d}.bin", dtype="<u2")
        assert ids.tolist() == [*t.encode(text).ids, eot_id(t)]
    # without the flag, the .txt-only case still reads (the default field is never refused)
    assert main(["tokenizer", "train", str(tmp_path / "c" / "b.txt"), "-o", str(tmp_path / "t2.json"),
                 "--vocab-size", "300"]) == 0


def test_a_rerun_with_another_text_field_keeps_the_plain_text_shards(tok, tmp_path, capsys):
    """A .txt has no fields, yet --text-field was part of its shard's identity: a rerun with another
    field over .txt beside JSONL refused the .txt shard too (named first: it sorts first). Now the
    refusal names the JSONL's shard, the one whose text would change; a run killed after the .txt's
    shard and rerun with the right field keeps that shard and reads the JSONL with the new field.
    Truth: the tokenizer's own encoding of each text, + end-of-text."""
    from pretrain.tokens.tokenizer import eot_id, load_tokenizer

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("a lazy dog")
    (tmp_path / "c" / "b.jsonl").write_text(json.dumps({"content": "a fox", "body": "the dog"}) + "\n")
    out = tmp_path / "t"
    run = ["tokenize", str(tmp_path / "c"), "--tokenizer", str(tok), "-o", str(out), "--workers", "1"]
    assert main([*run, "--text-field", "content"]) == 0
    capsys.readouterr()
    assert main([*run, "--text-field", "body"]) == 2
    _one_line(capsys, "shard_00001 was written by a different job", '"content" -> "body"')
    for f in ["manifest.json", *(f"shard_00001.{x}" for x in ("bin", "idx", "done"))]:
        (out / f).unlink()  # what a run killed after the .txt's shard leaves
    txt_shard = (out / "shard_00000.bin").stat().st_mtime_ns
    assert main([*run, "--text-field", "body"]) == 0
    assert "(1 shard written now, 1 already tokenized)" in capsys.readouterr().out
    assert (out / "shard_00000.bin").stat().st_mtime_ns == txt_shard
    t = load_tokenizer(tok)
    for k, text in enumerate(["a lazy dog", "the dog"]):
        ids = np.fromfile(out / f"shard_{k:05d}.bin", dtype="<u2").tolist()
        assert ids == [*t.encode(text).ids, eot_id(t)]
    assert main([*run, "--text-field", "body"]) == 0  # and again: nothing to do
    assert "(already tokenized, nothing to do)" in capsys.readouterr().out


def test_exclude_leaves_a_licence_out_of_tokenize_and_tokenizer_train_run_twice(tok, tmp_path, capsys):
    """A LICENSE.txt in the corpus folder became a document of the tokens, in silence. It is named
    now, and --exclude leaves it out of `tokenize` (run twice: nothing to do; without the option
    the rerun is refused naming the file) and of `tokenizer train`. Truth: the shards' inputs and
    the tokenizer's own encoding of the data file."""
    from pretrain.tokens.tokenizer import eot_id, load_tokenizer

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "LICENSE.txt").write_text("Permission is hereby granted, free of charge")
    (tmp_path / "c" / "a.jsonl").write_text(json.dumps({"text": "a lazy dog"}) + "\n")
    out = tmp_path / "t"
    run = ["tokenize", str(tmp_path / "c"), "--tokenizer", str(tok), "-o", str(out), "--workers", "1"]
    assert main([*run, "--exclude", "LICENSE*"]) == 0
    man = json.loads((out / "manifest.json").read_text())
    assert [Path(s["input"]).name for s in man["shards"]] == ["a.jsonl"]
    t = load_tokenizer(tok)
    ids = np.fromfile(out / "shard_00000.bin", dtype="<u2").tolist()
    assert ids == [*t.encode("a lazy dog").ids, eot_id(t)]
    capsys.readouterr()
    assert main([*run, "--exclude", "LICENSE*"]) == 0
    said = capsys.readouterr()
    assert "(already tokenized, nothing to do)" in said.out and "licence" not in said.err
    assert main(run) == 2
    err = capsys.readouterr().err
    assert "1 file read as documents looks like a licence or readme, not data (LICENSE.txt)" in err, err
    assert "LICENSE.txt new" in err.splitlines()[-1], err
    assert main(["tokenizer", "train", str(tmp_path / "c"), "-o", str(tmp_path / "k.json"), "--vocab-size",
                 "300", "--exclude", "LICENSE.txt"]) == 0
    assert "trained on 1 document" in capsys.readouterr().out


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> dict[str, Path]:
    from tests.test_tokens_mixture import make_token_dir

    root = tmp_path_factory.mktemp("two")
    return {"web": make_token_dir(root / "web", 400, 1), "wiki": make_token_dir(root / "wiki", 30, 2)}


def _windows(path: Path, seq: int) -> set[bytes]:
    """Every window of a token directory, read with numpy from its files (docs/tokens.md's format):
    the shards back to back, windows of seq + 1 tokens starting every seq tokens."""
    man = json.loads((path / "manifest.json").read_text())
    ids = np.concatenate([np.fromfile(path / s["bin"], dtype=man["dtype"]) for s in man["shards"]])
    return {ids[j * seq:j * seq + seq + 1].astype(np.int64).tobytes() for j in range((ids.size - 1) // seq)}


def _once_per_epoch(drawn: list[bytes], windows: set[bytes]) -> bool:
    """Each run of len(windows) draws (an epoch) reads each window once: a full one all of them,
    the last one distinct windows."""
    n = len(windows)
    chunks = [drawn[i:i + n] for i in range(0, len(drawn), n)]
    return all(len(set(c)) == len(c) and set(c) <= windows for c in chunks)


def test_a_mixture_changed_on_resume_goes_on_with_each_sources_epochs(two):
    """train.allow_changes let a resume change data.weights, then the sampler refused the state.
    Now the new weights hold from the saved position and each source's draws go on from where
    they were: every epoch of a source, across the change, reads each of its windows exactly once.
    Truth: the windows read with numpy from the shard files; the new quota is weight x BLOCK."""
    from pretrain.tokens.mixture import BLOCK, MixtureSampler

    seq = 8
    old = MixtureSampler(two, {"web": 0.9, "wiki": 0.1}, seq_len=seq, seed=3)
    rows = [old.next_batch(4) for _ in range(50)]
    state = json.loads(json.dumps(old.state_dict()))
    with pytest.raises(UserError, match=r"weights\.wiki 0\.1 -> 0\.25"):  # without allow_changes
        MixtureSampler(two, {"web": 0.75, "wiki": 0.25}, seq_len=seq, seed=3).load_state_dict(state)
    with pytest.raises(UserError, match="allow_changes continues other weights"):  # windows differ
        MixtureSampler(two, {"web": 0.75, "wiki": 0.25}, seq_len=seq, seed=4).load_state_dict(state, True)
    new = MixtureSampler(two, {"web": 0.75, "wiki": 0.25}, seq_len=seq, seed=3)
    new.load_state_dict(state, reweight=True)
    after = new.next_batch(BLOCK)  # one block of the new phase: its exact quota
    wins = {k: _windows(p, seq) for k, p in two.items()}
    assert sum(r.tobytes() in wins["wiki"] for r in after) == BLOCK // 4
    for name, w in wins.items():
        drawn = [r.tobytes() for r in [*np.concatenate(rows), *after] if r.tobytes() in w]
        assert len(drawn) >= 2 * len(w) and _once_per_epoch(drawn, w), name
    # the changed run, saved and resumed again, goes on exactly (its state carries the phase)
    saved = json.loads(json.dumps(new.state_dict()))
    ahead = [new.next_batch(4) for _ in range(20)]
    again = MixtureSampler(two, {"web": 0.75, "wiki": 0.25}, seq_len=seq, seed=3)
    again.load_state_dict(saved)
    assert all(np.array_equal(again.next_batch(4), a) for a in ahead)


def test_a_run_resumed_with_other_weights_and_allow_changes_trains_on(two, tmp_path):
    """The trainer's side: `--set train.allow_changes=true` with other data.weights continued past
    the recipe check, then stopped in the sampler ("trained on another mixture"). Truth: the
    sampler-level continuation (the test above), drawn by hand for the same steps."""
    from pretrain.tokens.mixture import MixtureSampler
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    def cfg(*extra):
        return tiny_config(tmp_path / "run", "", "data.kind=tokens", "model.vocab_size=1000",
                           f'data.sources={{web="{two["web"]}",wiki="{two["wiki"]}"}}', "checkpoint.every=4",
                           "checkpoint.async_save=false", *extra)

    Trainer(cfg("train.steps=4", "data.weights={web=9,wiki=1}"), quiet=True).fit()
    changed = ("train.steps=8", "data.weights={web=1,wiki=1}")
    with pytest.raises(UserError, match="allow_changes"):  # refused without it, as before
        Trainer(cfg(*changed), quiet=True)
    t = Trainer(cfg(*changed, "train.allow_changes=true"), quiet=True)
    t.fit()
    batch = t.cfg.data.batch_size
    ref = MixtureSampler(two, {"web": 9, "wiki": 1}, seq_len=32, seed=t.cfg.data.seed)
    for _ in range(4):
        ref.next_batch(batch)
    ref2 = MixtureSampler(two, {"web": 1, "wiki": 1}, seq_len=32, seed=t.cfg.data.seed)
    ref2.load_state_dict(ref.state_dict(), reweight=True)
    for _ in range(4):
        ref2.next_batch(batch)
    assert t.step == 8 and t.loader.state_dict()["inner"] == ref2.state_dict()


def test_a_token_directory_named_by_url_is_refused_as_one_naming_the_local_copy(tok, tmp_path, capsys,
                                                                                 monkeypatch):
    """`tokens inspect s3://b/tokens` (after `tokenize -o s3://b/tokens`) said "s3:/b/tokens: not
    found": Path() ate a slash, and nothing said shards are read from local disk only. Truth: the
    folder named is the one tokenize staged, and it inspects."""
    monkeypatch.setenv("PRETRAIN_WORK_DIR", str(tmp_path / "work"))
    (tmp_path / "a.txt").write_text(TEXT)
    url = "memory://sweepdata-bucket/tokens"
    assert main(["tokenize", str(tmp_path / "a.txt"), "--tokenizer", str(tok), "-o", url]) == 0
    capsys.readouterr()
    assert main(["tokens", "inspect", url]) == 2
    err = _one_line(capsys, f"{url}: a URL", "local disk", "kept a local copy: ")
    staged = err.rsplit("kept a local copy: ", 1)[1]
    assert main(["tokens", "inspect", staged]) == 0 and capsys.readouterr().out.startswith(staged)
    (tmp_path / "mix.toml").write_text(f'budget = 1e6\n[sources.web]\npath = "{url}"\nweight = 1\n')
    assert main(["mix", str(tmp_path / "mix.toml")]) == 2
    _one_line(capsys, f"source 'web': {url}: a URL")


def test_a_source_added_or_dropped_on_resume_and_a_bad_phase(two, tmp_path):
    """A source added on resume starts at its first epoch, the others go on with theirs; a source
    dropped is no longer read. A state's phase from someone else's checkpoint is checked."""
    from pretrain.tokens.mixture import MixtureSampler
    from tests.test_tokens_mixture import make_token_dir

    seq, code = 8, make_token_dir(tmp_path / "code", 60, 5)
    old = MixtureSampler(two, {"web": 0.5, "wiki": 0.5}, seq_len=seq, seed=1)
    rows = np.concatenate([old.next_batch(4) for _ in range(30)])
    state = old.state_dict()
    new = MixtureSampler({**two, "code": code}, {"web": 1, "wiki": 1, "code": 2}, seq_len=seq, seed=1)
    new.load_state_dict(state, reweight=True)
    after = np.concatenate([new.next_batch(4) for _ in range(400)])
    wins = {**{k: _windows(p, seq) for k, p in two.items()}, "code": _windows(code, seq)}
    for name, w in wins.items():
        drawn = [r.tobytes() for r in [*rows, *after] if r.tobytes() in w]
        assert drawn and _once_per_epoch(drawn, w), name
    only = MixtureSampler({"web": two["web"]}, {"web": 1}, seq_len=seq, seed=1)
    only.load_state_dict(state, reweight=True)
    assert all(r.tobytes() in wins["web"] for r in only.next_batch(64))
    for phase in ({"start": 10**9, "drawn": {}}, {"start": 4, "drawn": {"web": -1}}, [1, 2]):
        with pytest.raises(UserError, match="sampler state: phase must be"):
            new.load_state_dict({**new.state_dict(), "phase": phase})


def test_a_weight_without_a_source_is_named(two, tmp_path, capsys):
    """`--set data.weights.web=1` beside sources books and wiki said "name different sources",
    leaving the user to diff two lists; the odd name and its side are said now."""
    from pretrain import config as cfgmod
    from pretrain.train.testing import tiny_config

    cfg = tiny_config(tmp_path / "run", "", "data.kind=tokens", "model.vocab_size=1000",
                      f'data.sources={{web="{two["web"]}",wiki="{two["wiki"]}"}}',
                      "data.weights={web=1,wiki=1}")
    (tmp_path / "c.toml").write_text(cfgmod.dumps(cfg))
    assert main(["train", str(tmp_path / "c.toml"), "--quiet", "--dry-run",
                 "--set", "data.weights.books=2"]) == 2
    _one_line(capsys, "books: a weight but no token directory", "data.weights.NAME")
    assert not (tmp_path / "run").exists()


def test_a_teammates_megatron_or_datatrove_files_are_named_with_their_import(tok, tmp_path, capsys):
    """A Megatron-LM prefix given where a token directory goes said "not found", its folder "an
    interrupted one: rerun its command". Now its import is named, and that command works. Truth:
    files written by megatron-core's own writer; the datatrove pair in its documented layout."""
    from tests.test_tokens_import import megatron_write

    (tmp_path / "meg").mkdir()
    prefix = megatron_write(tmp_path / "meg" / "web_text_document", [[5, 6, 7, 0], [8, 9, 0]], np.uint16)
    (tmp_path / "dt").mkdir()
    np.array([5, 6, 0, 7, 0], dtype="<u2").tofile(tmp_path / "dt" / "00000_unshuffled.ds")
    np.array([3, 5], dtype="<u8").tofile(tmp_path / "dt" / "00000_unshuffled.ds.index")
    (tmp_path / "dt" / "00000_unshuffled.ds.metadata").write_text("tok|2\n")
    capsys.readouterr()
    meg = f"import-megatron {prefix} "
    for given, cmd in [(prefix, meg), (f"{prefix}.idx", meg), (prefix.parent, meg),
                       (tmp_path / "dt", f"import-datatrove {tmp_path / 'dt'} ")]:
        assert main(["tokens", "inspect", str(given)]) == 2
        err = _one_line(capsys, f"`pretrain tokens {cmd}-o TOKENS --tokenizer TOKENIZER`")
        args = err.split("`pretrain ", 1)[1].split("`", 1)[0].split()
        out = tmp_path / f"t{len(list(tmp_path.glob('t*')))}"
        args = [str(out) if a == "TOKENS" else str(tok) if a == "TOKENIZER" else a for a in args]
        assert main(args) == 0 and main(["tokens", "inspect", str(out)]) == 0, err
        capsys.readouterr()


def test_an_export_into_the_same_prefix_says_it_replaced_the_files(two, tmp_path, capsys):
    """`export-megatron` run twice said "wrote" both times; the second replaced the pair. Truth:
    the first export's bytes, which the second equals (same directory)."""
    prefix = tmp_path / "m" / "web_text_document"
    assert main(["tokens", "export-megatron", str(two["web"]), "-o", str(prefix)]) == 0
    first = [Path(f"{prefix}{x}").read_bytes() for x in (".bin", ".idx")]
    assert "replaced" not in capsys.readouterr().out
    assert main(["tokens", "export-megatron", str(two["web"]), "-o", str(prefix)]) == 0
    assert capsys.readouterr().out.strip().endswith("(replaced the files there)")
    assert [Path(f"{prefix}{x}").read_bytes() for x in (".bin", ".idx")] == first


def test_a_source_grown_on_resume_goes_on_with_allow_changes_and_is_named_without(two, tmp_path):
    """A source tokenized further since the checkpoint (more documents, more tokens) was refused even
    with train.allow_changes. Now the refusal names the source, its tokens then and now and the option;
    with it, the grown source starts a new epoch over all its windows (old and new documents, each
    once), the other source's epochs go on. Truth: the windows read with numpy from the shard files."""
    from pretrain.tokens.mixture import MixtureSampler
    from tests.test_tokens_mixture import make_token_dir

    seq = 8
    old = MixtureSampler(two, {"web": 0.6, "wiki": 0.4}, seq_len=seq, seed=2)
    rows = np.concatenate([old.next_batch(4) for _ in range(40)])
    state = json.loads(json.dumps(old.state_dict()))
    grown = {**two, "web": make_token_dir(tmp_path / "web", 500, 1)}  # the 400 documents, then 100 more
    wins = {"wiki": _windows(two["wiki"], seq), "web": _windows(grown["web"], seq)}
    assert _windows(two["web"], seq) < wins["web"]
    then, now = state["tokens"]["web"], json.loads((grown["web"] / "manifest.json").read_text())["tokens"]
    with pytest.raises(UserError, match=rf"tokens\.web {then} -> {now}\).*--set train\.allow_changes=true"):
        MixtureSampler(grown, {"web": 0.6, "wiki": 0.4}, seq_len=seq, seed=2).load_state_dict(state)
    new = MixtureSampler(grown, {"web": 0.6, "wiki": 0.4}, seq_len=seq, seed=2)
    new.load_state_dict(state, reweight=True)
    assert new.changed_tokens == {"web": (then, now)}
    after = new.next_batch(3200)
    web = [r.tobytes() for r in after if r.tobytes() in wins["web"]]
    assert len(web) >= len(wins["web"]) and set(web[:len(wins["web"])]) == wins["web"]  # a whole new epoch
    wiki = [r.tobytes() for r in [*rows, *after] if r.tobytes() in wins["wiki"]]
    assert len(wiki) > 2 * len(wins["wiki"]) and _once_per_epoch(wiki, wins["wiki"])  # unchanged: goes on
    saved = json.loads(json.dumps(new.state_dict()))  # run it twice: the new phase resumes exactly
    ahead = [new.next_batch(4) for _ in range(10)]
    again = MixtureSampler(grown, {"web": 0.6, "wiki": 0.4}, seq_len=seq, seed=2)
    again.load_state_dict(saved)
    assert all(np.array_equal(again.next_batch(4), a) for a in ahead)


def test_a_run_resumed_on_a_grown_source_says_what_changed(two, tmp_path, capsys):
    """The trainer's side: a resume onto a source tokenized further is refused without
    train.allow_changes (naming it), and with it trains on, saying source, tokens then -> now and what
    the sampler does. Truth: the sampler-level continuation, drawn by hand for the same steps."""
    import shutil

    from pretrain.tokens.mixture import MixtureSampler
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer
    from tests.test_tokens_mixture import make_token_dir

    web = tmp_path / "web"
    shutil.copytree(two["web"], web)

    def cfg(*extra):
        return tiny_config(tmp_path / "run", "", "data.kind=tokens", "model.vocab_size=1000",
                           f'data.sources={{web="{web}",wiki="{two["wiki"]}"}}', "checkpoint.every=4",
                           "checkpoint.async_save=false", "data.weights={web=3,wiki=1}", *extra)

    Trainer(cfg("train.steps=4"), quiet=True).fit()
    then = json.loads((web / "manifest.json").read_text())["tokens"]
    shutil.rmtree(web)
    make_token_dir(web, 500, 1)
    now = json.loads((web / "manifest.json").read_text())["tokens"]
    with pytest.raises(UserError, match=rf"web {then} -> {now}.*allow_changes"):
        Trainer(cfg("train.steps=8"), quiet=True)
    capsys.readouterr()
    t = Trainer(cfg("train.steps=8", "train.allow_changes=true"), quiet=True)
    t.fit()
    err = capsys.readouterr().err
    assert f"data.tokens.web {then!r} -> {now!r}" in err and "web: other tokens" in err, err
    batch = t.cfg.data.batch_size
    ref = MixtureSampler({"web": two["web"], "wiki": two["wiki"]}, {"web": 3, "wiki": 1}, seq_len=32,
                         seed=t.cfg.data.seed)
    for _ in range(4):
        ref.next_batch(batch)
    ref2 = MixtureSampler({"web": web, "wiki": two["wiki"]}, {"web": 3, "wiki": 1}, seq_len=32,
                          seed=t.cfg.data.seed)
    ref2.load_state_dict(ref.state_dict(), reweight=True)
    for _ in range(4):
        ref2.next_batch(batch)
    assert t.step == 8 and t.loader.state_dict()["inner"] == ref2.state_dict()
