"""Tokens: tokenizer training and loading, token shards, mixtures and the resumable sampler.

- `tokenizer.py`: byte-level BPE (train, load, end-of-text id, fingerprint).
- `shards.py`: the `.bin` / `.idx` / `manifest.json` format and its validating reader.
- `pipeline.py`: `pretrain tokenize`: corpus files -> token shards, parallel and resumable.
- `mixture.py`: epochs per source and `MixtureSampler`, the trainer's data source.
- `megatron.py`: export a token directory to Megatron-LM's `.bin` / `.idx`.
"""
