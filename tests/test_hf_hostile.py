"""A Hugging Face folder from someone else: every lie in it is one line naming the file and the reason.

The folder under attack is written by transformers itself (`save_pretrained` of a random tiny Llama,
and `PreTrainedTokenizerFast.save_pretrained` of the byte tokenizer), then edited one way at a time.
Both readers are tried: `pretrain eval HF_DIR` (`load_model`) and `model.init_from` (the trainer).
Before these checks, most of the cases below ended in a traceback (ZeroDivisionError, RecursionError,
SafetensorError, AttributeError) or, worse, were read on: 2.7 layers as 2, `rope_theta: "nan"`
scored NaN, int32 weights taken as numbers, a symlink out of the folder followed, pickled
`pytorch_model.bin` unpickled by transformers for an architecture we do not import, and a checkpoint
missing tensors scored with transformers' random initialisation of them.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest
import torch

from pretrain.errors import UserError

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("restore_torch_threads")

SHAPE = dict(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    out = tmp_path_factory.mktemp("hf_good") / "model"
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**SHAPE)).save_pretrained(out)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    tok.save_pretrained(out)
    return out


def _copy(folder: Path, tmp_path: Path) -> Path:
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    return bad


def _config(bad: Path, **changes) -> None:
    cfg = json.loads((bad / "config.json").read_text())
    cfg.update(changes)
    (bad / "config.json").write_text(json.dumps(cfg))


def _header(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _write(path: Path, header: dict, data: bytes, declared: int | None = None) -> None:
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h) if declared is None else declared) + h + data)


def _retype(bad: Path, dtype: str) -> None:
    header, data = _header(bad / "model.safetensors")
    for k, v in header.items():
        if k != "__metadata__":
            v["dtype"] = dtype
    _write(bad / "model.safetensors", header, data)


def _offset_past_end(bad: Path) -> None:
    header, data = _header(bad / "model.safetensors")
    key = next(k for k in header if k != "__metadata__")
    header[key]["data_offsets"][1] += 10**9
    _write(bad / "model.safetensors", header, data)


def _huge_header(bad: Path) -> None:
    header, data = _header(bad / "model.safetensors")
    _write(bad / "model.safetensors", header, data, declared=100 * 2**20)


def _link(bad: Path, name: str, target: Path) -> None:
    (bad / name).unlink()
    (bad / name).symlink_to(target)


def _outside(tmp_path: Path, folder: Path, name: str) -> Path:
    out = tmp_path / "elsewhere"
    out.mkdir(exist_ok=True)
    shutil.copy(folder / name, out / name)
    return out / name


CASES = {  # name: (edit(bad, folder, tmp_path), what the message must say)
    "config a list": (lambda b, f, t: (b / "config.json").write_text("[1, 2]"),
                      "config.json.*expected an object"),
    "config nested 100k deep": (lambda b, f, t: (b / "config.json").write_text("[" * 100_000 + "]" * 100_000),
                                "config.json"),
    "zero heads": (lambda b, f, t: _config(b, num_attention_heads=0), "num_attention_heads"),
    "2.7 layers": (lambda b, f, t: _config(b, num_hidden_layers=2.7), "num_hidden_layers"),
    "ten million positions": (lambda b, f, t: _config(b, max_position_embeddings=10**7),
                              "10,000,000 positions"),
    "true as layers": (lambda b, f, t: _config(b, num_hidden_layers=True), "num_hidden_layers"),
    "hidden size a word": (lambda b, f, t: _config(b, hidden_size="abc"), "hidden_size"),
    "tied head as the string false": (lambda b, f, t: _config(b, tie_word_embeddings="false"),
                                      "tie_word_embeddings"),
    "width not a multiple of heads": (lambda b, f, t: _config(b, hidden_size=33), "hidden_size"),
    "rope theta NaN": (lambda b, f, t: _config(b, rope_parameters={"rope_theta": float("nan")}),
                       "rope_theta"),
    "rope parameters a list": (lambda b, f, t: _config(b, rope_parameters=[1]), "rope_parameters"),
    "weights int32": (lambda b, f, t: _retype(b, "I32"), "model.safetensors.*I32"),
    "offset past the end": (lambda b, f, t: _offset_past_end(b), "model.safetensors"),
    "100 MB header": (lambda b, f, t: _huge_header(b), "model.safetensors"),
    "index a list": (lambda b, f, t: (b / "model.safetensors.index.json").write_text('{"weight_map": [1]}'),
                     "index.json"),
    "weights linked outside": (lambda b, f, t: _link(b, "model.safetensors",
                                                     _outside(t, f, "model.safetensors")),
                               "model.safetensors.*outside the folder"),
    "config linked outside": (lambda b, f, t: _link(b, "config.json", _outside(t, f, "config.json")),
                              "config.json.*outside the folder"),
    "tokenizer linked to /etc/passwd": (lambda b, f, t: _link(b, "tokenizer.json", Path("/etc/passwd")),
                                        "tokenizer.json.*outside the folder"),
}


@pytest.mark.parametrize("case", CASES)
def test_eval_refuses_a_hostile_folder_in_one_line(folder, tmp_path, case):
    from pretrain.eval.lm import load_model

    bad = _copy(folder, tmp_path)
    edit, says = CASES[case]
    edit(bad, folder, tmp_path)
    with pytest.raises(UserError, match=says):
        load_model(bad)


@pytest.mark.parametrize("case", CASES)
def test_init_from_refuses_a_hostile_folder_in_one_line(folder, tmp_path, case, text):
    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.trainer import Trainer

    bad = _copy(folder, tmp_path)
    edit, says = CASES[case]
    edit(bad, folder, tmp_path)
    cfg = cfgmod.load(RunConfig, None, [f"model.init_from={bad}", f"train.out={tmp_path / 'run'}",
                                        f"data.path={text}", "train.steps=0", "precision.dtype=fp32",
                                        "log.tensorboard=false", "train.threads=1"])
    with pytest.raises(UserError, match=says):
        Trainer(cfg, quiet=True)


def test_the_hub_cache_layout_is_not_an_escape(folder, tmp_path):
    """huggingface_hub's cache keeps files in `blobs/` and links them from `snapshots/REV/`: a folder
    there is read as usual (only a link out of the folder and out of its repository is refused)."""
    from pretrain.eval.lm import load_model

    repo = tmp_path / "models--someone--tiny"
    snap = repo / "snapshots" / "0123abc"
    (repo / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    for f in folder.iterdir():
        shutil.copy(f, repo / "blobs" / f.name)
        (snap / f.name).symlink_to(os.path.relpath(repo / "blobs" / f.name, snap))
    model, _ = load_model(snap)
    assert model.encode("hi") == [104, 105]


def test_an_architecture_read_by_transformers_never_unpickles_and_never_guesses(folder, tmp_path):
    """A model type we do not import goes to transformers: pickled weights are refused (not loaded
    with torch.load), and weights the checkpoint lacks are an error, not a random initialisation."""
    from pretrain.eval.lm import load_model

    olmo = _copy(folder, tmp_path)  # OLMo 2 is Llama with q/k norms and post-norms, which it lacks
    _config(olmo, model_type="olmo2", architectures=["Olmo2ForCausalLM"])
    with pytest.raises(UserError, match="missing.*(q_norm|k_norm|post_feedforward)"):
        load_model(olmo)
    pickled = tmp_path / "pickled"
    shutil.copytree(olmo, pickled)
    from safetensors.torch import load_file

    torch.save(load_file(str(pickled / "model.safetensors")), pickled / "pytorch_model.bin")  # loadable
    (pickled / "model.safetensors").unlink()
    with pytest.raises(UserError, match="safetensors"):
        load_model(pickled)


def test_eval_refuses_a_tokenizer_larger_than_the_model(folder, tmp_path, text):
    """A tokenizer.json from elsewhere whose ids reach past the model's embedding: one line naming it,
    not an IndexError from the embedding after the first batch (init_from already refused it)."""
    from pretrain.eval.lm import load_model
    from pretrain.tokens.tokenizer import train_tokenizer

    bad = _copy(folder, tmp_path)
    train_tokenizer([Path(text).read_text()[:20_000]], 300).save(str(bad / "tokenizer.json"))
    with pytest.raises(UserError, match="tokenizer.*300.*257"):
        load_model(bad)


def _evil_module(bad: Path, marker: Path, cls: str, base: str) -> None:
    (bad / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                 f"from transformers import {base}\nclass {cls}({base}):\n    pass\n")


@pytest.mark.parametrize("what", ["tokenizer", "model"])
def test_a_folders_own_python_never_runs_even_when_stdin_says_yes(folder, tmp_path, monkeypatch, what):
    """`auto_map` names Python in the folder. transformers, left to decide, asks on stdin whether to
    run it: `echo y | pretrain eval HF_DIR` (or a user's "y" at the prompt) imported the folder's
    evil.py. It is refused in one line naming the folder, whatever stdin says."""
    import io

    from pretrain.eval.lm import load_model

    bad, marker = _copy(folder, tmp_path), tmp_path / "ran"
    if what == "tokenizer":
        tc = json.loads((bad / "tokenizer_config.json").read_text())
        tc.update(tokenizer_class="EvilTokenizer", auto_map={"AutoTokenizer": [None, "evil.EvilTokenizer"]})
        (bad / "tokenizer_config.json").write_text(json.dumps(tc))
        _evil_module(bad, marker, "EvilTokenizer", "PreTrainedTokenizerFast")
    else:  # a model type we do not import goes to AutoModelForCausalLM
        _config(bad, model_type="evil", architectures=["EvilForCausalLM"],
                auto_map={"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilForCausalLM"})
        _evil_module(bad, marker, "EvilConfig", "LlamaConfig")
    import transformers.dynamic_module_utils as dmu

    monkeypatch.setattr(dmu, "HF_MODULES_CACHE", str(tmp_path / "modules"))  # where it would copy evil.py
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n" * 10))
    with pytest.raises(UserError, match=f"{bad}.*custom code"):
        load_model(bad)
    assert not marker.exists()


def test_a_tokenizer_file_of_a_gigabyte_is_refused_unread(folder, tmp_path):
    """transformers read a sparse 1 GiB tokenizer.json whole (1 GB of memory, 8 s) before saying it
    was not JSON: it is refused by its size, before a byte is read."""
    from pretrain.eval.lm import load_model

    bad = _copy(folder, tmp_path)
    with open(bad / "tokenizer.json", "wb") as f:
        f.truncate(2**30)  # no block on disk
    with pytest.raises(UserError, match="tokenizer.json: 1,073,741,824 bytes, over the"):
        load_model(bad)


def test_init_from_a_folder_without_tokenizer_json(folder, tmp_path, text):
    """A weights-only folder with text data and no data.tokenizer: the text read as bytes trained a
    model of another vocabulary on ids it never saw, in silence (every byte id fits a larger
    vocabulary). Refused in one line, unless the folder's vocabulary is the byte vocabulary (then
    the bytes are its ids); data.tokenizer names the tokenizer when the folder lacks it."""
    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.trainer import Trainer

    def cfg(model: Path, *extra: str):
        return cfgmod.load(RunConfig, None, [f"model.init_from={model}", f"train.out={tmp_path / model.name}",
                                            f"data.path={text}", "train.steps=1", "precision.dtype=fp32",
                                            "log.tensorboard=false", "train.threads=1", *extra])

    byte_level = _copy(folder, tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (byte_level / name).unlink(missing_ok=True)
    assert [r["step"] for r in Trainer(cfg(byte_level), quiet=True).fit()] == [1]
    torch.manual_seed(0)
    other = tmp_path / "v300"
    wider = transformers.LlamaConfig(**{**SHAPE, "vocab_size": 300})
    transformers.LlamaForCausalLM(wider).save_pretrained(other)
    with pytest.raises(UserError, match=rf"^{other}: no tokenizer\.json, and its vocabulary \(300 tokens\) "
                                        r"is not the byte vocabulary \(257\): .* --set data\.tokenizer=PATH"):
        Trainer(cfg(other), quiet=True)
    named = Trainer(cfg(other, f"data.tokenizer={folder / 'tokenizer.json'}"), quiet=True)
    assert named.shape.vocab_size == 300 and named.cfg.data.tokenizer == str(folder / "tokenizer.json")


def test_each_safetensors_header_is_parsed_once_per_file_not_once_per_tensor(tmp_path, monkeypatch):
    """A file's header is parsed by safetensors on every `safe_open` (47 ms at 20,000 tensors), and a
    crafted file of thin layers made the import quadratic: one open per tensor read. Counted, not
    timed: the opens are the files', whatever the tensors, even with an index that alternates every
    tensor between two shards; the weights equal those of the one-file folder."""
    import safetensors
    from safetensors.torch import load_file, save_file

    from pretrain.eval.lm import _import_ours
    from pretrain.train.hf import read_hf_model_config

    def load(path):  # what eval and init_from run: check_holds, then load_hf_weights
        return _import_ours(path, read_hf_model_config(path), "cpu").state_dict()

    one = tmp_path / "one"
    torch.manual_seed(0)
    six = transformers.LlamaConfig(**{**SHAPE, "num_hidden_layers": 6})
    transformers.LlamaForCausalLM(six).save_pretrained(one)
    tensors = load_file(str(one / "model.safetensors"))
    two = tmp_path / "two"
    shutil.copytree(one, two)
    (two / "model.safetensors").unlink()
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    where = {k: names[i % 2] for i, k in enumerate(sorted(tensors))}
    for name in names:
        save_file({k: v for k, v in tensors.items() if where[k] == name}, str(two / name), {"format": "pt"})
    (two / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": where}))

    opened = []
    real = safetensors.safe_open
    monkeypatch.setattr(safetensors, "safe_open", lambda p, *a, **k: opened.append(p) or real(p, *a, **k))
    a = load(one)
    assert len(tensors) == 6 * 9 + 3 and len(opened) == 2  # check_holds' listing, then the load: one each
    opened.clear()
    b = load(two)
    assert sorted(Path(p).name for p in opened) == names  # was 1 + one per tensor read
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_slices_read_once_parsed_equal_safetensors_own(tmp_path):
    """The reader that replaced `safe_open(...).get_slice` per read returns what safetensors returns,
    for every weight dtype, rows (one file read), columns (a mapping) and an empty tensor."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from pretrain.train.hf_files import SafetensorsFile

    torch.manual_seed(0)
    tensors = {f"{dt}.{i}": torch.randn(*shape).to(dt)
               for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16)
               for i, shape in enumerate([(5, 7), (9,), (0, 3)])}
    save_file(tensors, str(tmp_path / "m.safetensors"))
    ours = SafetensorsFile(tmp_path / "m.safetensors")
    boxes = [(slice(0, 5),), (slice(1, 4),), (slice(2, 2),),
             (slice(1, 4), slice(2, 6)), (slice(None), slice(3, 7))]
    with safe_open(str(tmp_path / "m.safetensors"), "pt") as theirs:
        for key in tensors:
            a, b = ours.get_slice(key), theirs.get_slice(key)
            assert (a.get_dtype(), a.get_shape()) == (b.get_dtype(), b.get_shape())
            for box in boxes if len(b.get_shape()) == 2 else boxes[:3]:
                idx = box if len(box) == 2 else box[0]
                x, y = a[idx], b[idx]
                assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), (key, box)


def test_a_billion_positions_in_an_architecture_read_by_transformers_is_refused(tmp_path):
    """`pretrain eval` windows a text by config.json's context (as lm-evaluation-harness): a GPT-NeoX
    folder (not imported: transformers scores it) claiming 10^9 positions scored a 1 MB text in one
    forward pass, 82.6 s instead of 2.8 s (attention grows faster than the text). Held to the
    rule an imported folder meets: the context's rotary numbers at most the weight files' bytes."""
    from pretrain.eval.lm import load_model
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    shape = dict(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                 num_attention_heads=4)
    for positions in (2048, 10**9):
        out = tmp_path / str(positions)
        torch.manual_seed(0)
        cfg = transformers.GPTNeoXConfig(**shape, max_position_embeddings=positions)
        transformers.GPTNeoXForCausalLM(cfg).save_pretrained(out)
        tok.save_pretrained(out)
    model, _ = load_model(tmp_path / "2048")  # a real context (what the library's default is) loads
    assert model.max_length == 2048
    with pytest.raises(UserError, match=r"config\.json: a context of 1,000,000,000 positions") as e:
        load_model(tmp_path / str(10**9))
    assert "\n" not in str(e.value)


def test_a_hundred_thousand_layers_in_an_architecture_read_by_transformers_is_refused_unbuilt(tmp_path,
                                                                                              monkeypatch):
    """A GPT-NeoX config.json (scored by transformers, not imported) of 100,000 layers over 100 KB of
    weights: transformers built the modules for over 120 s and 4.9 GB before it could say the
    tensors were missing. Refused from config.json first: each layer holds at least `hidden_size`."""
    from pretrain.eval.lm import load_model
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    out = tmp_path / "neox"
    cfg = transformers.GPTNeoXConfig(vocab_size=257, hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64)
    transformers.GPTNeoXForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    assert load_model(out)[0].max_length == 64  # two real layers load
    _config(out, num_hidden_layers=100_000)

    def build(*args, **kwargs):  # the code before got here and built for minutes: fail at once
        raise AssertionError("transformers was asked to build the model")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", build)
    said = r"config\.json: 100,000 layers of width 32 need at least 3,200,000 numbers"
    with pytest.raises(UserError, match=said) as e:
        load_model(out)
    assert "\n" not in str(e.value)
