"""Every setting checked before work starts (session 8): the keys of `pretrain curate`'s config and
the numeric options of every command.

The keys come from the config dataclasses (CurateConfig and its sections), so a key added later
without a bound and its reason fails here. For each numeric key: a value just outside its range,
a string and a bool (True is an int to Python) are refused when the TOML file is loaded, in one
line that names the file, the key, the value and the allowed range; the edge values themselves
load and build the key's step. Every string key that is not free text (a path, a field name, a
language code) refuses a value it does not know. Values fine alone but contradicting each other
(a minimum above its maximum) are refused too. Every int or float option of every command (from
the parser) is a pretrain.bounds.Number with a reason; past its bounds the parsed value is refused
in one line naming the flag, before the command runs; its edges pass. ~6 s.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path

import pytest

from pretrain import config as cfgmod
from pretrain.bounds import show
from pretrain.errors import UserError

# str keys that take any text: paths, record field names, replacements, user steps
FREE_TEXT = {"reader.text_field", "reader.id_field", "reader.url_field", "reader.metadata_field",
             "language.model_path", "classifier.model"}


def fields(cls: type, prefix: str = "") -> list[tuple[str, type, dataclasses.Field]]:
    """(dotted key, scalar type, field) of every int, float and str field, `X | None` included."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        typ = hints[f.name]
        if dataclasses.is_dataclass(typ):
            out += fields(typ, f"{prefix}{f.name}.")
            continue
        if typing.get_origin(typ) not in (None, typing.Union, types.UnionType):  # lists, tuples
            continue
        args = [a for a in typing.get_args(typ) or (typ,) if a is not type(None)]
        if len(args) == 1 and args[0] in (int, float, str):
            out.append((prefix + f.name, args[0], f))
    return out


def _curate_fields(typ: tuple[type, ...]):
    from pretrain.curate.pipeline import CurateConfig

    return [(k, t, f) for k, t, f in fields(CurateConfig) if t in typ]


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return repr(value) if not isinstance(value, str) else f'"{value}"'


def _load(tmp_path: Path, key: str, value):
    """CurateConfig from a TOML file that sets only `key`."""
    from pretrain.curate.pipeline import CurateConfig

    section, _, name = key.rpartition(".")
    path = tmp_path / "curate.toml"
    path.write_text(f"[{section}]\n" * bool(section) + f"{name} = {_toml(value)}\n")
    return cfgmod.load(CurateConfig, path), path


def _refused(tmp_path: Path, key: str, value, *said: str) -> str:
    with pytest.raises(UserError) as e:
        _load(tmp_path, key, value)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(tmp_path / "curate.toml")), msg  # names the file
    assert key in msg and all(s in msg for s in said), (key, value, msg)
    return msg


def _outside(f: dataclasses.Field, typ: type) -> list:
    """Values just past each end of a field's range."""
    meta, step = f.metadata, (1 if typ is int else 1e-3)
    lo = meta.get("lo")
    if lo is None and meta.get("gt") is None and not meta.get("signed"):
        lo = 0
    out = []
    if lo is not None:
        out.append(typ(lo - step))
    if meta.get("gt") is not None:
        out.append(typ(meta["gt"]))
    if meta.get("hi") is not None:
        out.append(meta["hi"] + max(step, abs(meta["hi"]) * 1e-3) if typ is float else meta["hi"] + 1)
    return out


def _edges(f: dataclasses.Field, typ: type) -> list:
    meta = f.metadata
    lo = meta.get("lo")
    if lo is None and meta.get("gt") is None and not meta.get("signed"):
        lo = 0
    out = [typ(lo)] if lo is not None else []
    if meta.get("gt") is not None:
        out.append(typ(meta["gt"] + (1 if typ is int else 1e-3)))
    return out + ([typ(meta["hi"])] if meta.get("hi") is not None else [])


def _builds(cfg, key: str) -> None:
    """The step that reads `key` builds with the config (the code takes the edge value)."""
    from pretrain.curate import pipeline

    section = key.split(".")[0]
    no_step = {"reader": None, "dedup": None, "shards": None}  # read by the job, not by a step
    family = {"decontam": "decontaminate", **no_step}.get(section, section)
    if family is not None:
        pipeline._FAMILIES[family](cfg)  # noqa: SLF001


def test_every_numeric_key_has_a_bound_and_its_reason():
    """A key added without `bounded(..., why=)` fails here: a share needs its 1, a count its reason."""
    bare = [k for k, _, f in _curate_fields((int, float)) if not f.metadata.get("why")]
    assert bare == [], f"numeric keys without a bound's reason: {bare}"
    from pretrain.train.config import RunConfig  # the train sweep (test_config_sweep.py) sweeps its values

    bare = [k for k, t, f in fields(RunConfig) if t in (int, float) and not f.metadata.get("why")]
    assert bare == [], f"train keys without a bound's reason: {bare}"
    # a float without an upper bound must be a ratio or a time that has none, said so in its reason
    open_floats = sorted(k for k, t, f in _curate_fields((float,)) if f.metadata.get("hi") is None)
    assert open_floats == ["classifier.threshold", "reader.max_ratio"], open_floats


def _ids(x):
    return x if isinstance(x, str) else ""


def test_docs_table_says_each_range():
    """docs/curation.md's table of settings, row by row from the dataclasses' bounds and reasons."""
    from pretrain.config import allowed_range

    doc = (Path(__file__).resolve().parents[1] / "docs" / "curation.md").read_text()
    for key, typ, f in _curate_fields((int, float)):
        rng, _, why = allowed_range(f).partition("; ")
        assert f"| `{key}` | {typ.__name__} | {rng} | {why} |" in doc, key


@pytest.mark.parametrize("key,typ,f", _curate_fields((int, float)), ids=_ids)
def test_numeric_key(key, typ, f, tmp_path):
    for v in _outside(f, typ):  # one line: file, key, value, and the range with its reason
        _refused(tmp_path, key, v, f"got {show(v)}", f.metadata["why"])
    for v in ("ten", True) + ((1.5,) if typ is int else ()):  # wrong types, a bool among them
        _refused(tmp_path, key, v, f"wants {typ.__name__}")
    _refused(tmp_path, key, math.inf, "got inf")  # TOML inf: "must be a number" or "wants int"
    for v in _edges(f, typ):
        try:
            cfg, _ = _load(tmp_path, key, v)
        except UserError as e:  # an edge refused only by a consistency check naming another key
            section = key.split(".")[0] + "."
            assert str(e).count(section) >= 2, (key, v, str(e))  # this key and another
            continue
        _builds(cfg, key)


@pytest.mark.parametrize("key,typ,f", _curate_fields((str,)), ids=_ids)
def test_string_key_refuses_what_it_does_not_know(key, typ, f, tmp_path):
    if key in FREE_TEXT:
        return
    _refused(tmp_path, key, "no-such-value", "'no-such-value'")
    _refused(tmp_path, key, 3, "wants str")


@pytest.mark.parametrize("text,said", [
    ("[rules]\nmin_doc_words = 500\nmax_doc_words = 100\n",
     "rules.min_doc_words=500 is above rules.max_doc_words=100"),
    ("[rules]\nmin_avg_word_length = 12.0\n",
     "rules.min_avg_word_length=12.0 is above rules.max_avg_word_length=10.0"),
    ("[rules]\ndup_n_grams = [[0, 0.1]]\n", "rules.dup_n_grams: each pair is [n, share]"),
    ("[rules]\ntop_n_grams = [[2, 1.5]]\n", "rules.top_n_grams: each pair is [n, share]"),
    ("[decontam]\nn = 5\n", "decontam.min_words=8 is above decontam.n=5"),
    ("[language]\nreread_reject = 0.9\n", "language.reread_reject=0.9 is above language.reread_accept=0.75"),
    ("[dedup]\nbands = 200\nrows = 100\n", "dedup.bands x dedup.rows = 200 x 100 = 20,000 hashes"),
    ("[classifier]\nthreshold = 50.0\n", "classifier.threshold=50.0 with per_word"),
])
def test_values_that_contradict_each_other(text, said, tmp_path):
    """Each alone is in range; together the job would run for hours to drop (or keep) everything."""
    from pretrain.curate.pipeline import CurateConfig

    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(UserError) as e:
        cfgmod.load(CurateConfig, path)
    assert str(e.value).startswith(f"{path}: ") and said in str(e.value) and "\n" not in str(e.value)


def test_valid_edges_still_load(tmp_path):
    """What papers use loads: GPT-3's 13-grams at min_words 13, a per-document vote sum of -200."""
    from pretrain.curate.pipeline import CurateConfig

    cfg = cfgmod.load(CurateConfig, None, [
        "decontam.n=13", "decontam.min_words=13", "classifier.per_word=false", "classifier.threshold=-200.0",
        "rules.min_doc_words=0", "rules.max_doc_words=0", "dedup.bands=20", "dedup.rows=450"])
    got = (cfg.decontam.min_words, cfg.classifier.threshold, cfg.dedup.bands * cfg.dedup.rows)
    assert got == (13, -200.0, 9000)  # RefinedWeb's 20 x 450


def test_cli_refuses_before_any_work(tmp_path, capsys):
    """`pretrain curate IN -o OUT --config bad.toml`: one line naming the file, no OUT made."""
    from pretrain.cli import main

    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    bad = tmp_path / "bad.toml"
    bad.write_text("[rules]\ndup_line_frac = 30.0\n")
    rc = main(["curate", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "o"), "--config", str(bad)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"{bad}: rules.dup_line_frac must be <= 1, got 30.0 (a share of lines" in err
    assert not (tmp_path / "o").exists()


# --- the numeric options of every command, from the parser ---------------------------------------------

def _commands():
    """(argv prefix, parser) of every command and action under it (`tokens inspect`)."""
    from pretrain.cli import build_parser

    out = []

    def walk(prefix, parser):
        out.append((prefix, parser))
        for action in parser._subparsers._group_actions if parser._subparsers else []:  # noqa: SLF001
            for name, sub in action.choices.items():
                walk([*prefix, name], sub)

    walk([], build_parser())
    return out[1:]


def _options():
    return [(prefix, a) for prefix, parser in _commands() for a in parser._actions  # noqa: SLF001
            if a.option_strings and getattr(a.type, "typ", a.type) in (int, float)]


def _argv(prefix: list[str], parser, flag: str, value) -> list[str]:
    """The command with its required arguments as placeholders (nothing runs) and `flag value`."""
    argv = list(prefix)
    for a in parser._actions:  # noqa: SLF001
        if not a.option_strings and a.nargs != 0 and not a.choices:
            argv.append("x")
        elif a.required and a.option_strings[-1] != flag:
            argv += [a.option_strings[-1], str(getattr(a.type, "metadata", {}).get("lo") or 1)]
    return [*argv, flag, str(value)]


def test_every_numeric_option_has_bounds_and_their_reason():
    from pretrain.bounds import Number

    bare = [f"{' '.join(p)} {a.option_strings[-1]}" for p, a in _options()
            if not a.choices and not (isinstance(a.type, Number) and a.type.metadata["why"])]
    assert bare == [], f"numeric options without pretrain.bounds.Number(..., why=): {bare}"


def test_docs_table_says_each_option_range():
    """docs/curation.md's table of options, row by row from the parsers' Number types."""
    from pretrain.config import allowed_range

    doc = (Path(__file__).resolve().parents[1] / "docs" / "curation.md").read_text()
    for prefix, a in _options():
        if not a.choices:
            rng, _, why = allowed_range(dataclasses.field(metadata=a.type.metadata)).partition("; ")
            row = f"| `{' '.join(prefix)} {a.option_strings[-1]}` | {a.type.typ.__name__} | {rng} | {why} |"
            assert row in doc, row


@pytest.mark.parametrize("prefix,action", _options(),
                         ids=lambda x: " ".join(x) if isinstance(x, list) else x.option_strings[-1])
def test_numeric_option(prefix, action):
    from pretrain.cli import build_parser, check_options

    if action.choices:  # `--token-size 2|4`: argparse refuses the rest
        return
    flag, typ, meta = action.option_strings[-1], action.type.typ, action.type.metadata
    parser = build_parser()
    sub = dict((" ".join(p), s) for p, s in _commands())[" ".join(prefix)]
    for v in _outside(action.type, typ) + ([math.nan, math.inf] if typ is float else [2**63]):
        args = parser.parse_args(_argv(prefix, sub, flag, v))
        with pytest.raises(UserError) as e:
            check_options(parser, args)
        said = str(e.value)
        assert "\n" not in said and said.startswith(f"{flag} must be") and show(v) in said, said
        if "64-bit" not in said and "finite" not in said:
            assert f"({meta['why']})" in said, said
    for v in _edges(action.type, typ):
        check_options(parser, parser.parse_args(_argv(prefix, sub, flag, v)))


def test_a_bad_option_stops_the_command_before_any_work(tmp_path, capsys):
    from pretrain.cli import main

    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    rc = main(["curate", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "o"), "--workers", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == ("pretrain curate: error: --workers must be >= 1, got 0 "
                               "(processes, one per core)")
    assert not (tmp_path / "o").exists()


# --- `pretrain ablate`'s config and `pretrain mix`'s mixture file --------------------------------------

def _ablation_fields():
    from pretrain.eval.ablate import AblationConfig

    return [(k, t, f) for k, t, f in fields(AblationConfig) if t in (int, float)]


def test_ablation_and_mixture_numbers_have_bounds_and_reasons():
    from pretrain.tokens.mixture import MIXTURE_BOUNDS

    assert [k for k, _, f in _ablation_fields() if not f.metadata.get("why")] == []
    assert all(b.get("why") for b in MIXTURE_BOUNDS.values())


@pytest.mark.parametrize("key,typ,f", _ablation_fields(), ids=_ids)
def test_ablation_key(key, typ, f, tmp_path):
    from pretrain.eval.ablate import load_config

    section, _, name = key.rpartition(".")
    path = tmp_path / "ablate.toml"

    def write(value):
        body = f"[{section}]\n" * bool(section) + f"{name} = {_toml(value)}\n"
        variant = '[[variants]]\nname = "raw"\n'
        path.write_text(variant + body if section else body + variant)

    for v in [*_outside(f, typ), "ten", True]:
        write(v)
        with pytest.raises(UserError) as e:
            load_config(path)
        assert str(e.value).startswith(f"{path}: ") and key in str(e.value) and "\n" not in str(e.value)
    for v in _edges(f, typ):
        write(v)
        assert load_config(path) is not None


@pytest.mark.parametrize("key", ["budget", "seq_len", "seed"])
def test_mixture_key(key, tmp_path):
    from pretrain.tokens.mixture import MIXTURE_BOUNDS, load_mixture

    meta = MIXTURE_BOUNDS[key]
    typ = float if key == "budget" else int
    path = tmp_path / "mixture.toml"
    sources = '[sources.web]\npath = "tokens/web"\nweight = 1.0\n'
    base = {"budget": 1e9, "seq_len": 1024, "seed": 0}
    field = dataclasses.field(metadata=meta)
    for v in _outside(field, typ):
        path.write_text("".join(f"{k} = {_toml(v if k == key else x)}\n" for k, x in base.items()) + sources)
        with pytest.raises(UserError) as e:
            load_mixture(path)
        said = str(e.value)
        assert said.startswith(f"{path}: {key} must be") and show(v) in said, said
        assert meta["why"] in said or v <= 0 or "64-bit" in said, said  # above the top: says why
    for v in _edges(field, typ):
        path.write_text("".join(f"{k} = {_toml(v if k == key else x)}\n" for k, x in base.items()) + sources)
        assert getattr(load_mixture(path), key) == v
    path.write_text("budget = 1e9\nseq-len = 2048\n" + sources)  # a typo no longer takes the default
    with pytest.raises(UserError, match="unknown key 'seq-len'"):
        load_mixture(path)


def _train_fields():
    from pretrain.train.config import RunConfig

    return [(k, t, f) for k, t, f in fields(RunConfig) if t in (int, float)]


def test_train_bounds_have_one_source():
    """train/config.py's validate() kept its own table beside the fields' bounds (and the two said
    different things: beta1 <= 1 at load, < 1 there). Now a value past a field's bound, set in code
    where `load` never sees it, is refused by validate() in the words `load` uses."""
    from pretrain.train.config import RunConfig, validate

    for key, typ, f in _train_fields():
        section, name = key.split(".")
        for v in _outside(f, typ) + ([typ(f.metadata["lt"])] if f.metadata.get("lt") is not None else []):
            with pytest.raises(UserError) as loaded:
                cfgmod.load(RunConfig, None, [f"{key}={v!r}"])
            cfg = RunConfig()
            setattr(getattr(cfg, section), name, v)
            with pytest.raises(UserError) as checked:
                validate(cfg)
            assert str(checked.value) == str(loaded.value), key


def test_inf_suggests_0_only_where_0_means_no_bound(tmp_path):
    from pretrain.bounds import check_number
    from pretrain.curate.readers import ReaderConfig

    meta = {f.name: f.metadata for f in dataclasses.fields(ReaderConfig)}
    with pytest.raises(UserError, match="0 where 'no bound' is meant"):
        check_number(math.inf, meta["max_ratio"], "reader.max_ratio")
    for key, m in (("optim.lr", dict(_train_fields()[0][2].metadata)), ("--warn-epochs", None)):
        if m is None:  # mix --warn-epochs: 0 is refused, so it is not suggested
            m = next(a.type.metadata for p, a in _options() if a.option_strings[-1] == key)
        with pytest.raises(UserError) as e:
            check_number(math.inf, m, key)
        assert "no bound" not in str(e.value) and "a finite one" in str(e.value), str(e.value)


def test_max_ratio_below_1_is_refused_with_its_reason_and_0_still_turns_it_off(tmp_path):
    """reader.max_ratio=0.5 refused almost every file past 16 MiB (any that compresses at all)."""
    msg = _refused(tmp_path, "reader.max_ratio", 0.5, "must be >= 1 (or 0), got 0.5",
                   "web text compresses 3-10x")
    assert "no bound" in msg
    for v in (0.0, 1.0, 1000.0):
        assert _load(tmp_path, "reader.max_ratio", v)[0].reader.max_ratio == v


def test_export_max_shard_size_is_a_bounded_size():
    from pretrain.cli import build_parser, check_options

    parser = build_parser()
    for text, n in (("5GB", 5 * 10**9), ("2GiB", 2 * 2**30), ("1.5MB", 1_500_000), ("1000", 1000)):
        assert parser.parse_args(["export", "r", "-o", "o", "--max-shard-size", text]).max_shard_size == n
    args = parser.parse_args(["export", "r", "-o", "o", "--max-shard-size", "0"])
    with pytest.raises(UserError, match=r"^--max-shard-size must be >= 1, got 0 \(bytes of one shard"):
        check_options(parser, args)


def test_tokenizer_vocab_size_reads_k_as_plan_reads_its_suffixes(capsys):
    """32k = 32,000 as `plan --tokens` reads k (plan/shapes.py parse_count) and Llama's vocabulary
    (32,000); 32Ki = 2**15 (Mistral v0.3's 32,768); forms read two ways are refused by argparse."""
    from pretrain.cli import build_parser
    from pretrain.plan.shapes import parse_count

    parser = build_parser()
    argv = ["tokenizer", "train", "c", "-o", "t.json", "--vocab-size"]
    for text, n in (("32k", parse_count("32k")), ("32K", 32_000), ("50.257k", 50_257), ("32Ki", 2**15),
                    ("1M", parse_count("1m")), ("32000", 32_000)):
        assert parser.parse_args([*argv, text]).vocab_size == n, text
    for text in ("32kb", "32KiB", "1.0001k", "1e4", "k"):
        with pytest.raises(SystemExit):
            parser.parse_args([*argv, text])
        err = capsys.readouterr().err
        assert f"argument --vocab-size: {text!r}: a whole count such as 32000, 32k (= 32,000)" in err, err
