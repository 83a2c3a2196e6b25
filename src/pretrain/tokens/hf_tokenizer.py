"""A run's tokenizer as transformers' files: tokenizer.json, tokenizer_config.json, special_tokens_map.json.

Training encodes a special token's text inside a document as ordinary text (`load_tokenizer`'s
`literal_specials`: a web page quoting "<|endoftext|>" cannot inject a document boundary).
transformers' fast tokenizers do the opposite by default; `split_special_tokens: true` in
tokenizer_config.json makes `AutoTokenizer` encode such text as training did. Documents end with
the end-of-text token and nothing is prepended, so `eos_token` is that token and no BOS is added.
An imported tokenizer whose tokenizer.json prepends a BOS (Llama's template) keeps doing so in
transformers, as its model family expects; `bos_token` then names it.

A byte-level run (no tokenizer.json: ids are UTF-8 bytes, 256 the end of text) gets an equivalent
tokenizer.json: a BPE without merges over GPT-2's byte-to-character alphabet.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pretrain.errors import UserError
from pretrain.tokens.tokenizer import EOT, eot_id, load_tokenizer


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte value (Radford et al. 2019, encoder.py):
    printable Latin-1 bytes map to themselves, the rest to code points from 256 up, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def byte_tokenizer():
    """A `tokenizers.Tokenizer` whose ids are the UTF-8 bytes (0-255) and <|endoftext|> (256)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(EOT, special=True, normalized=False)])
    tok.encode_special_tokens = True
    return tok


def run_tokenizer_path(cfg) -> Path | None:
    """The tokenizer.json a run trained with; None for a byte-level run."""
    d = cfg.data
    if d.kind == "text":
        check_run_tokenizer(cfg)
        return Path(d.tokenizer) if d.tokenizer else None
    for src in d.sources.values():  # `pretrain tokenize` copies its tokenizer into each token dir
        p = Path(src) / "tokenizer.json"
        if p.is_file():
            return p
    from pretrain.commands.sample import _sources_not_here

    raise UserError(f"data.sources: no tokenizer.json in {', '.join(d.sources.values()) or '(none)'}"
                    f"{_sources_not_here(d.sources, '; run from there')}")


def check_run_tokenizer(cfg, way: str = "") -> None:
    """The run's data.tokenizer is there, or one line saying whose it was: a run started from a
    Hugging Face folder encodes its text with that folder's tokenizer.json, and a cleaned cache made
    `export`, `sample` and `eval` say only "tokenizer not found: hf/base/tokenizer.json"."""
    tok, base = cfg.data.tokenizer, cfg.model.init_from
    if not tok or Path(tok).exists():
        return
    whence = ""
    if base and Path(tok).parent == Path(base):
        gone = "is gone" if not Path(base).is_dir() else "no longer holds it"
        whence = f", taken from model.init_from's folder, which {gone}"
    raise UserError(f"{tok}: not found: the tokenizer this run's text was encoded with (data.tokenizer"
                    f"{whence}); put that file back{way}")


def _names_beside(path: Path) -> dict:
    """bos/eos names from a transformers tokenizer_config.json next to the tokenizer, if any."""
    side = path.parent / "tokenizer_config.json"
    if not side.is_file():
        return {}
    from pretrain.untrusted import load_json_object

    try:
        cfg = load_json_object(side)
    except ValueError:  # BadFile too (nested too deep, a FIFO): the names are optional
        return {}
    out = {}
    for k in ("bos_token", "eos_token"):
        v = cfg.get(k)
        out[k] = v.get("content") if isinstance(v, dict) else v
    return {k: v for k, v in out.items() if isinstance(v, str)}


def _template_bos(tok) -> str | None:
    """The special token a tokenizer.json's TemplateProcessing puts before every text (Llama's
    <|begin_of_text|>), or None. transformers adds it on encode; `pretrain tokenize` does not."""
    post = json.loads(tok.to_str()).get("post_processor") or {}
    first = (post.get("single") or [{}])[0] if post.get("type") == "TemplateProcessing" else {}
    return (first.get("SpecialToken") or {}).get("id")


def write_hf_tokenizer(cfg, seq_len: int, folder: str | Path) -> dict:
    """Write the run's tokenizer files into `folder`; {bos_id, eos_id, files}."""
    folder = Path(folder)
    path = run_tokenizer_path(cfg)
    if path is None:
        tok = byte_tokenizer()
        tok.save(str(folder / "tokenizer.json"))
        names = {}
    else:
        tok = load_tokenizer(path)
        shutil.copyfile(path, folder / "tokenizer.json")
        names = _names_beside(path)
    eos = names.get("eos_token") or tok.id_to_token(eot_id(tok))
    template_bos = _template_bos(tok)
    bos = template_bos or names.get("bos_token")
    special = {"eos_token": eos, **({"bos_token": bos} if bos else {})}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", **special, "model_max_length": seq_len,
              "split_special_tokens": True, "clean_up_tokenization_spaces": False,
              "add_bos_token": template_bos is not None, "add_eos_token": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    return {"bos_id": tok.token_to_id(bos) if bos else None, "eos_id": tok.token_to_id(eos),
            "files": ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]}
