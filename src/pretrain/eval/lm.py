"""The model as evaluation sees it: text -> token ids, ids -> text, token ids (B, T) -> logits (B, T, V).

`from_run` wraps a `pretrain train` run (its newest checkpoint and its tokenizer, or bytes);
`from_hf_dir` wraps a folder that transformers' AutoModelForCausalLM and AutoTokenizer load;
`from_transformers` wraps objects already in memory. Nothing here downloads anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from pretrain.errors import UserError
from pretrain.progress import count


@dataclass
class EvalModel:
    """A causal LM for scoring: `logits(ids, keep)` must be causal (position t sees only ids[:, :t+1]).

    `keep` (1D positions, or None for all) asks for the logits of those positions only, (B, len(keep), V):
    the output head and the log-softmax then run on the positions a score reads, not on all of them.
    """

    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    logits: Callable[..., torch.Tensor]
    max_length: int  # longest input the model takes
    eot_id: int  # the token an empty context starts from (lm-eval's prefix_token_id)
    device: torch.device = torch.device("cpu")
    name: str = "model"
    # Optional packed forward: tree_logits(ids (B, T), positions (B, T), mask (B, T, T) bool, True =
    # may attend, keep) -> logits (B, len(keep), V). With it, a context runs once for all its choices.
    tree_logits: Callable[..., torch.Tensor] | None = None
    # Optional incremental decoding: start_decoding(rows) -> a train.decode.Decoder over those token
    # rows (each at most max_length long); greedy generation then runs each prompt once.
    start_decoding: Callable[..., object] | None = None
    # Optional exact cutting (bytes, or a tokenizer with a `pieces` rule): cut(text, hi) -> the last
    # position at or before hi after which `encode_after(text[c:])` is the tail of encode(text),
    # or None. With it a long context costs the model's window in encoding, not its length.
    cut: Callable[[str, int], int | None] | None = None
    encode_after: Callable[[str], list[int]] | None = None


def from_run(run: str | Path, step: int | None = None, tokenizer: str = "",
             device: str = "cpu", storage: str | None = None) -> tuple[EvalModel, int]:
    """(model, checkpoint step) from a run directory; bytes as tokens when the run used none."""
    from pretrain.train.runs import load_run_model

    model, cfg, step = load_run_model(run, step, storage)
    model.to(device)
    if not tokenizer and cfg.data.kind == "text":
        from pretrain.tokens.hf_tokenizer import check_run_tokenizer

        check_run_tokenizer(cfg, ", or pass --tokenizer PATH (the same file)")
    tok_path = tokenizer or cfg.data.tokenizer
    if cfg.data.kind == "tokens" and not tok_path:
        from pretrain.commands.sample import _sources_not_here, _tokenizer_of_shards

        tok_path = _tokenizer_of_shards(cfg.data.sources)
        if not tok_path:
            raise UserError(f"{run}: trained on token shards; pass --tokenizer TOKENIZER.json"
                            f"{_sources_not_here(cfg.data.sources)}")
    encode, decode, eot = _tokenizer_functions(tok_path)
    if tok_path:
        from pretrain.tokens.tokenizer import load_tokenizer

        _check_vocab(tok_path, load_tokenizer(tok_path).get_vocab_size(), model.shape.vocab_size)
    return from_module(model, encode, decode, model.shape.seq_len, eot, f"{Path(run).name}@{step}"), step


def from_module(model: torch.nn.Module, encode, decode, max_length: int, eot_id: int,
                name: str = "model", autocast_dtype: str = "") -> EvalModel:
    """Wrap one of our Transformers; `autocast_dtype` (e.g. "bf16") runs it as the trainer does."""
    from contextlib import nullcontext

    device = next(model.parameters()).device

    def amp():
        if not autocast_dtype:
            return nullcontext()
        from pretrain.train.precision import autocast

        return autocast(autocast_dtype, device)

    @torch.no_grad()
    def logits(ids: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        with amp():
            if keep is None:
                return model(ids.to(device)).float()
            pos = torch.arange(ids.shape[1], device=device).expand(ids.shape[0], -1)
            return tree_forward(model, ids.to(device), pos, None, keep.to(device)).float()

    @torch.no_grad()
    def tree(ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor,
             keep: torch.Tensor | None = None) -> torch.Tensor:
        with amp():
            return tree_forward(model, ids.to(device), pos.to(device), mask.to(device),
                                None if keep is None else keep.to(device)).float()

    def start_decoding(rows):
        from pretrain.train.decode import Decoder

        return Decoder(model, rows, device, amp)

    return EvalModel(encode, decode, logits, max_length, eot_id, device, name, tree, start_decoding,
                     getattr(encode, "cut", None), getattr(encode, "after", None))


def tree_forward(model, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor | None,
                 keep: torch.Tensor | None = None) -> torch.Tensor:
    """Our Transformer's forward with explicit positions and attention mask (packed prefix trees).

    The same modules in the same order as Transformer.forward; only the attention takes `mask`
    (B, T, T; None = causal) and rotary angles / learned positions are read at `pos` (B, T) instead
    of 0..T-1. With `keep` (positions whose logits are wanted; all when None) the last block
    computes queries, attention output and MLP only there (its keys and values still cover every
    position), and the output head runs on those rows only: a score reads a few positions of a
    long context, so this saves most of a block and the head on every other position.
    """
    import torch.nn.functional as F

    x = model.tok_emb(ids)  # (B, T, C)
    if model.pos_emb is not None:
        x = x + model.pos_emb(pos)
    rope = None if model.pos_emb is not None else (model.rope_cos[pos][:, None], model.rope_sin[pos][:, None])
    blocks = list(model.layers.values())
    for n, block in enumerate(blocks):
        x = _block(block, x, rope, mask, keep if n == len(blocks) - 1 else None)
    x = model.norm(x)
    return F.linear(x, model.tok_emb.weight) if model.output is None else model.output(x)


def _block(block, x: torch.Tensor, rope, mask: torch.Tensor | None,
           keep: torch.Tensor | None) -> torch.Tensor:
    """One block; with `keep`, outputs (B, len(keep), C) for those positions only."""
    import torch.nn.functional as F

    a = block.attn
    h = block.attn_norm(x)
    B, T, _ = h.shape
    hq = h if keep is None else h[:, keep]
    q = a.wq(hq).view(B, hq.shape[1], -1, a.head_dim).transpose(1, 2)  # (B, H, Tq, D)
    k = a.wk(h).view(B, T, -1, a.head_dim).transpose(1, 2)
    v = a.wv(h).view(B, T, -1, a.head_dim).transpose(1, 2)
    q, k = a.normed(q, k)
    if rope is not None:
        cos, sin = rope
        q = _rope_at(q, *((cos, sin) if keep is None else (cos[:, :, keep], sin[:, :, keep])))
        k = _rope_at(k, cos, sin)
    if a.n_kv != a.n_heads:
        k, v = k.repeat_interleave(a.n_heads // a.n_kv, 1), v.repeat_interleave(a.n_heads // a.n_kv, 1)
    if keep is None and mask is None:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        if mask is None:  # causal rows of the kept positions
            m = (torch.arange(T, device=x.device)[None, :] <= keep[:, None])[None, None]
        else:
            m = (mask if keep is None else mask[:, keep])[:, None]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    x = (x if keep is None else x[:, keep]) + a.wo(y.transpose(1, 2).reshape(B, hq.shape[1], -1))
    return x + block.mlp(block.mlp_norm(x))


def _rope_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    from pretrain.train.decode import rope_at

    return rope_at(x, cos, sin)


def _tokenizer_functions(path: str):
    """encode/decode/eot for a tokenizer.json, or UTF-8 bytes (id 256 ends a document) when empty."""
    if not path:
        def encode(text: str) -> list[int]:
            return list(text.encode("utf-8"))

        def decode(ids: list[int]) -> str:
            return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

        encode.cut = lambda text, hi: hi if 0 < hi < len(text) else None  # type: ignore[attr-defined]
        encode.after = encode  # type: ignore[attr-defined]  # any character boundary is a byte boundary
        return encode, decode, 256
    from pretrain.tokens import pieces
    from pretrain.tokens.tokenizer import eot_id, load_tokenizer

    tok = load_tokenizer(path)
    rule = pieces.cut_rule(tok)  # a long text (a 64 MiB perplexity file) in pieces: tokens/pieces.py

    def encode(text: str) -> list[int]:
        if len(text) > pieces.LONG_DOC and isinstance(rule, str):
            _say_whole_once(path, rule)
        return pieces.encode_ids(tok, text, rule).tolist()

    if isinstance(rule, pieces.Rule):
        encode.cut = lambda text, hi: pieces.last_cut(text, hi, rule)  # type: ignore[attr-defined]
        encode.after = lambda text: pieces.encode_after(tok, text, rule)  # type: ignore[attr-defined]
    return encode, tok.decode, eot_id(tok)


_SAID_WHOLE: set[str] = set()  # tokenizers already said to encode long texts whole, in this process


def _say_whole_once(path: str, why: str) -> None:
    """One line on stderr (rank 0) the first time a text over LONG_DOC is encoded whole with `path`:
    `tokenize` said it per shard, eval was silent (an 8 MiB text costs ~1 GB so)."""
    import sys

    from pretrain.onerank import global_rank
    from pretrain.tokens import pieces
    from pretrain.untrusted import one_line

    if path in _SAID_WHOLE or global_rank() != 0:
        return
    _SAID_WHOLE.add(path)
    print(f"eval: texts over {pieces.LONG_DOC:,} characters are {pieces.whole_because(why)} "
          f"(tokenizer {one_line(path)})", file=sys.stderr, flush=True)


def from_transformers(model, tokenizer, name: str = "hf") -> EvalModel:
    """Wrap a transformers causal LM and its tokenizer (no special tokens added, as lm-eval's HFLM)."""
    model.eval()
    device = next(model.parameters()).device

    @torch.no_grad()
    def logits(ids: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        if keep is None:
            return model(ids.to(device)).logits
        return model(ids.to(device), logits_to_keep=keep.to(device)).logits  # head on `keep` only

    encode, decode, eot = from_transformers_tokenizer(tokenizer)

    @torch.no_grad()
    def tree(ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor,
             keep: torch.Tensor | None = None) -> torch.Tensor:
        # transformers takes a 4D boolean mask (B, 1, T, T) as given, with explicit position_ids
        extra = {} if keep is None else {"logits_to_keep": keep.to(device)}
        return model(ids.to(device), position_ids=pos.to(device),
                     attention_mask=mask[:, None].to(device), **extra).logits

    cfg = model.config
    max_length = int(getattr(cfg, "max_position_embeddings", 0) or getattr(cfg, "n_positions", 0) or 2048)
    # Only Llama-family models are known to honour a custom 4D mask and left-padded cached decoding
    # (tests/test_hf_twice.py on Qwen2); others take the plain path (a full forward per new token).
    family = getattr(cfg, "model_type", "") in ("llama", "mistral", "qwen2", "qwen3")
    decoding = (lambda rows: HFDecoder(model, rows, device)) if family else None
    packed = tree if family else None
    return EvalModel(encode, decode, logits, max_length, eot, device, name, packed, decoding)


def _cache_name() -> str:
    """transformers 5 names the cache `cache` (`past_key_values` warns, and goes in 5.40); 4.x
    knows only `past_key_values`, as pyproject's eval extra allows."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


class HFDecoder:
    """train/decode.py's Decoder interface over a transformers model's own key/value cache: rows are
    left-padded with an attention mask and explicit positions, so a step runs one token per row
    (what transformers' `generate` does) instead of every row's whole window again."""

    def __init__(self, model, rows, device):
        width = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, width - len(r):] = torch.as_tensor(list(r), dtype=torch.long)
            mask[b, width - len(r):] = 1
        self.model, self.mask, self.pending = model, mask.to(device), ids.to(device)
        self.lens = torch.tensor([len(r) for r in rows], device=device)  # position of the next token
        self.past, self.name = None, _cache_name()

    @torch.no_grad()
    def logits(self) -> torch.Tensor:
        ids, self.pending = self.pending, None
        if self.past is None:
            pos = (self.mask.cumsum(-1) - 1).clamp(min=0)
        else:
            self.mask = torch.cat([self.mask, torch.ones_like(ids)], 1)
            pos, self.lens = self.lens[:, None], self.lens + 1
        out = self.model(ids, attention_mask=self.mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                         **{self.name: self.past})
        self.past = getattr(out, self.name)
        return out.logits[:, -1].float()

    def push(self, tokens) -> None:
        self.pending = torch.as_tensor(tokens, dtype=torch.long, device=self.mask.device).reshape(-1, 1)

    def retain(self, rows) -> None:
        sel = torch.as_tensor(list(rows), dtype=torch.long, device=self.mask.device)
        self.past.batch_select_indices(sel)
        self.mask, self.lens = self.mask[sel], self.lens[sel]
        if self.pending is not None:
            self.pending = self.pending[sel]


def from_hf_dir(path: str | Path, device: str = "cpu", ours: bool = True) -> EvalModel:
    """A folder written by save_pretrained (or `pretrain export --format hf`), loaded offline.

    Llama, Mistral, Qwen2, Qwen3 and GPT-2 folders are imported into our Transformer (train/hf.py,
    the same import as `model.init_from`), so they are scored by the same code as a run; others, or
    `ours=False`, go through transformers' AutoModelForCausalLM (safetensors only: pickled weights
    are never loaded; a checkpoint missing tensors is refused, not scored half random). The tokenizer
    is always transformers' AutoTokenizer (what lm-evaluation-harness uses), without special tokens.
    The folder is someone else's: its config.json is checked before transformers reads it.
    """
    from pretrain.train.hf import Unsupported, read_hf_model_config
    from pretrain.train.hf_files import check_links

    path = Path(path)
    if not (path / "config.json").is_file():
        raise UserError(f"{path}: not a Hugging Face model folder (no config.json)")
    check_links(path)
    read = None
    if ours:
        try:
            read = read_hf_model_config(path)  # a broken config.json is refused here, in one line
        except Unsupported:
            read = None  # a valid config of another architecture: transformers computes it
    _check_tokenizer_files(path)
    tok = _transformers_load(path, "tokenizer")
    if read is not None:
        _check_vocab(path, len(tok), read[0]["vocab_size"])
        net = _import_ours(path, read, device)
        wrapped = from_transformers_tokenizer(tok)
        return from_module(net, wrapped[0], wrapped[1], net.shape.seq_len, wrapped[2], path.name)
    _check_layers(path)
    model = _transformers_load(path, "model")
    _check_vocab(path, len(tok), model.get_input_embeddings().num_embeddings)
    wrapped = from_transformers(model.to(device), tok, name=path.name)
    _check_context(path, model.config, wrapped.max_length)
    return wrapped


def _check_layers(path: Path) -> None:
    """Before transformers builds a model of an architecture we do not import: each layer holds at
    least a norm's `hidden_size` numbers, so layers x width may not pass the weight files' bytes. A
    GPT-NeoX config.json of 100,000 layers over 100 KB of weights ran past 120 s and 4.9 GB building
    modules before transformers could say the tensors were missing (an imported family is held to
    its whole parameter count: train/hf_io.py, `check_holds`)."""
    from pretrain import untrusted

    cfg = untrusted.load_json(path / "config.json", within=path)
    if not isinstance(cfg, dict):
        return  # transformers says what is wrong with it
    def first(*keys: str) -> int:
        v = next((cfg[k] for k in keys if k in cfg), 0)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0
    layers = first("num_hidden_layers", "n_layer", "num_layers")
    width = first("hidden_size", "n_embd", "d_model") or 1
    have = sum(f.stat().st_size for f in path.glob("*.safetensors"))
    if have and layers * width > have:  # none: transformers says only safetensors are read
        raise UserError(f"{path / 'config.json'}: {layers:,} layers of width {width:,} need at least "
                        f"{layers * width:,} numbers, more than the weight files hold in bytes ({have:,})")


def _check_context(path: Path, cfg, positions: int) -> None:
    """The rule an imported folder meets (train/hf_io.py, `check_holds`), for a folder transformers
    scores: texts are windowed by config.json's context, so 10^9 positions scored a 1 MB text in one
    forward pass (82.6 s, not 2.8 s; attention grows faster than the text). A context's rotary
    numbers (positions x head width) may not pass the weight files' bytes (Llama 3.1 8B: 16.8 M, 16 GB)."""
    heads = getattr(cfg, "num_attention_heads", 0) or 1
    width = getattr(cfg, "head_dim", 0) or (getattr(cfg, "hidden_size", 0) or heads) // heads
    have = sum(f.stat().st_size for f in path.glob("*.safetensors"))
    numbers = positions * max(int(width), 1)
    if numbers > have:
        raise UserError(f"{path / 'config.json'}: a context of {positions:,} positions "
                        f"(max_position_embeddings) needs {numbers:,} rotary numbers, more than the weight "
                        f"files hold in bytes ({have:,}); texts would be scored in one forward pass each")


# The files transformers' tokenizers read whole (tokenizer.json through Tokenizer.from_file).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                    "vocab.json", "vocab.txt", "merges.txt", "tokenizer.model", "spiece.model")


def _check_tokenizer_files(folder: Path) -> None:
    """Each tokenizer file a regular file of at most MAX_TOKENIZER_BYTES (a sparse 1 GiB
    tokenizer.json took 1 GB and 8 s before transformers said it was not JSON), and all of them
    together at most MAX_TOKENIZER_ELEMENTS entries (2.4 M merges in 42 MB took 1.5 GB to load)."""
    from pretrain import untrusted
    from pretrain.tokens.tokenizer import MAX_TOKENIZER_BYTES, check_tokenizer_elements

    counted = 0
    for name in _TOKENIZER_FILES:
        f = folder / name
        if f.exists() or f.is_symlink():
            size = untrusted.check_file(f, within=None)
            if size > MAX_TOKENIZER_BYTES:
                raise UserError(f"{f}: {size:,} bytes, over the {MAX_TOKENIZER_BYTES:,} bytes a tokenizer "
                                "file may hold; refusing to read it")
            counted = check_tokenizer_elements(f, untrusted.read_bytes(f, MAX_TOKENIZER_BYTES), counted)


def _check_vocab(where: str | Path, tokens: int, rows: int) -> None:
    """A tokenizer (from elsewhere) whose ids reach past the embedding would fail on the first batch
    that uses one, or worse score with another model's ids: refuse it before anything is scored."""
    if tokens > rows:
        raise UserError(f"{where}: its tokenizer has {tokens:,} tokens, more than the model's {rows:,} "
                        "embedding rows: it is not this model's tokenizer")


def _transformers_load(path: Path, what: str):
    """AutoTokenizer or AutoModelForCausalLM (fp32, safetensors only) on `path`; whatever transformers
    raises on a broken folder becomes one line naming it, and so do tensors the checkpoint lacks."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # trust_remote_code=False, said: left unset, transformers asks on stdin whether to run the
    # folder's own Python (its `auto_map`), and `echo y |` or a user's "y" ran it.
    try:
        if what == "tokenizer":
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
        model, info = AutoModelForCausalLM.from_pretrained(
            str(path), local_files_only=True, dtype=torch.float32, use_safetensors=True,
            output_loading_info=True, trust_remote_code=False)
    except Exception as e:  # a peer library's many error types on input we do not control
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise UserError(f"{path}: transformers cannot load its {what} ({type(e).__name__}: {first[:200]})"
                        + (" (only safetensors weights are read)" if what == "model" else "")) from None
    bad = sorted(info.get("missing_keys") or []) + sorted(str(k) for k in info.get("mismatched_keys") or [])
    if bad:
        more = ", ..." if len(bad) > 3 else ""
        raise UserError(f"{path}: the checkpoint is missing or mis-shapes {count(len(bad), 'tensor')} "
                        f"{type(model).__name__} needs ({', '.join(bad[:3])}{more}); "
                        "transformers would fill them at random")
    return model


def hf_transformer(path: str | Path, device: str = "cpu"):
    """Our Transformer holding a transformers folder of a family train/hf.py imports (what `eval`
    scores and `sample` generates with); `Unsupported` for a valid config of another architecture."""
    from pretrain.train.hf import read_hf_model_config
    from pretrain.train.hf_files import check_links

    path = Path(path)
    if not (path / "config.json").is_file():
        raise UserError(f"{path}: not a Hugging Face model folder (no config.json)")
    check_links(path)
    return _import_ours(path, read_hf_model_config(path), device)


def _import_ours(path: Path, read: tuple, device: str):
    """Our Transformer filled from a transformers folder whose config `read_hf_model_config` read."""
    from pretrain.plan.shapes import ModelShape
    from pretrain.train.config import ModelConfig
    from pretrain.train.hf import family_name
    from pretrain.train.hf_io import HFCheckpoint, load_hf_weights
    from pretrain.train.model import build_model

    fields, theta, eps, scaling = read
    shape = ModelShape(name=family_name(fields, path), **fields)
    HFCheckpoint(path).check_holds(shape)  # before building it: a config.json may claim anything
    mcfg = ModelConfig(preset="", rope_theta=theta, norm_eps=eps, rope_scaling=scaling)
    model = build_model(shape, mcfg, "meta")
    load_hf_weights(model, path, device)
    return model.eval()


def from_transformers_tokenizer(tokenizer) -> tuple:
    """(encode, decode, prefix id) of a transformers tokenizer, as lm-eval's HFLM uses it."""
    def encode(text: str) -> list[int]:
        # verbose=False: a text longer than model_max_length is scored in windows, so transformers'
        # "will result in indexing errors" warning is a false alarm on every long text
        return tokenizer.encode(text, add_special_tokens=False, verbose=False)

    def decode(ids: list[int]) -> str:
        # as HFLM.tok_decode and our own tokenizer's decode: "<|endoftext|>" is no text (its 13
        # bytes per document were counted by bits per byte, and kept in generated answers)
        return tokenizer.decode(ids, skip_special_tokens=True)

    eot = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    return encode, decode, int(eot if eot is not None else 0)


def use_threads(target: str | Path, threads: int | None) -> int:
    """Set torch's CPU threads for inference: `threads` when given, else the run's train.threads
    (the tiny-cpu recipe sets 1: on a busy CPU a second thread's barrier waits cost a tiny model
    5-30x, docs/decisions.md), else `idle_threads` (a Hugging Face folder, a run with 0). Returns
    the count in force."""
    if threads is None and (Path(target) / "config.toml").is_file():
        from pretrain.config import load
        from pretrain.train.config import RunConfig

        try:
            threads = load(RunConfig, Path(target) / "config.toml").train.threads or None
        except UserError:
            threads = None  # the model load says what is wrong with the config, in its own words
    if threads is None:
        threads = idle_threads(torch.get_num_threads())
    if not 1 <= threads <= 1024:  # torch takes a C int: 10**30 was an OverflowError
        raise UserError(f"--threads must be in 1..1024, got {threads}")
    torch.set_num_threads(threads)
    return torch.get_num_threads()


def idle_threads(cores: int) -> int:
    """torch's default (`cores`: its physical cores) less the 1-minute load average, rounded, at least 1:
    the threads that find a core free. Each thread of a forward pass waits for the slowest at every
    op, so one thread that shares its core stalls all: `pretrain eval FOLDER` took 84 s on torch's 2
    threads and 13 s on 1 on a busy 2-core machine (bench/bench_eval_threads.py: 2.3x for a 100 MB
    model at load 11). Where there is no load average (not Unix), `cores`."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return cores
    return max(1, min(cores, 1024, round(cores - load)))


def load_model(target: str | Path, step: int | None = None, tokenizer: str = "",
               device: str = "cpu", storage: str | None = None) -> tuple[EvalModel, int | None]:
    """A run directory (has config.toml) or a Hugging Face folder (has config.json)."""
    p = Path(target)
    if (p / "config.toml").is_file():
        return from_run(p, step, tokenizer, device, storage)
    if (p / "config.json").is_file():
        return from_hf_dir(p, device), None
    raise UserError(f"{p}: neither a run directory (config.toml) nor a Hugging Face folder (config.json)")
