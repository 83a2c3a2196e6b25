"""tokenizer.json files shaped like the ones users bring, built with HF tokenizers (no download):
the pre-tokenizer, normalizer, model options and post-processor of each family as published, a small
BPE trained here. Used by tests/test_tokens_pieces.py and bench/bench_tokens_long.py."""

from __future__ import annotations

from collections.abc import Iterable

from pretrain.tokens.pieces import LLAMA3_SPLIT, O200K_SPLIT, QWEN2_SPLIT

FAMILIES = ("llama3", "qwen2", "o200k", "llama2", "mistral", "bert")


def build(family: str, texts: Iterable[str], vocab_size: int = 3000):
    """A trained `tokenizers.Tokenizer` of `family`:
    - llama3: Split(Llama-3's regex, isolated) + ByteLevel(no regex), BPE ignore_merges, BOS added;
    - qwen2: NFC, Split(Qwen2's regex) + ByteLevel, BPE, no BOS;
    - o200k: Split(GPT-4o's o200k regex) + ByteLevel, BPE, no BOS;
    - llama2: Prepend("▁") + Replace(" ", "▁") normalizer, no pre-tokenizer, BPE byte_fallback
      fuse_unk, <s> added (HF's conversion of Llama-2's SentencePiece model, legacy);
    - mistral: Metaspace("▁", prepend_scheme "first", split False), the same BPE (legacy=False);
    - bert: BertNormalizer (lowercase), BertPreTokenizer, WordPiece, [CLS] ... [SEP] added.
    The SentencePiece-style ones are trained with a Metaspace that splits, as SentencePiece's
    trainer splits at spaces; "▁▁" and "▁▁▁▁" are added as Llama-2's vocabulary has them."""
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    if family in ("llama3", "qwen2", "o200k"):
        regex, bos = {"llama3": (LLAMA3_SPLIT, "<|begin_of_text|>"), "qwen2": (QWEN2_SPLIT, None),
                      "o200k": (O200K_SPLIT, None)}[family]
        tok = Tokenizer(models.BPE(ignore_merges=family == "llama3"))
        tok.normalizer = normalizers.NFC() if family == "qwen2" else None
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        specials = [bos or "<|endoftext|>", "<|eot_id|>"]
        tok.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=specials, show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        post = [processors.ByteLevel(trim_offsets=False)]
        if bos:
            post.append(processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, 0)]))
        tok.post_processor = processors.Sequence(post)
    elif family in ("llama2", "mistral"):
        tok = Tokenizer(models.BPE(byte_fallback=True, fuse_unk=True, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        tok.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
            limit_alphabet=vocab_size // 3))  # SentencePiece's character_coverage: rare ones unknown
        tok = _with_space_runs(tok)
        if family == "llama2":
            tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
            tok.pre_tokenizer = None
        else:
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    elif family == "bert":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(texts, trainers.WordPieceTrainer(
            vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            show_progress=False, limit_alphabet=vocab_size // 3))
        tok.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    else:
        raise ValueError(f"unknown family {family!r}: one of {', '.join(FAMILIES)}")
    tok.encode_special_tokens = True  # as pretrain's load_tokenizer does
    return tok


def _with_space_runs(tok):
    """The tokenizer with merges "▁"+"▁" and "▁▁"+"▁▁" at the end (Llama-2 has both)."""
    import json

    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    vocab, merges = spec["model"]["vocab"], spec["model"]["merges"]
    for a, b in (("▁", "▁"), ("▁▁", "▁▁")):
        vocab[a + b] = len(vocab)
        merges.append([a, b] if merges and isinstance(merges[0], list) else f"{a} {b}")
    return Tokenizer.from_str(json.dumps(spec))
