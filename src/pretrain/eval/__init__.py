"""Evaluating a base model: task readers, log-likelihood scoring, perplexity, memorization, ablations.

Every scorer here sees a model only as an `EvalModel` (encode, decode, a callable returning logits),
so the same code scores one of our runs and any transformers causal LM; the metric definitions
(acc, acc_norm, perplexity, bits per byte) are lm-evaluation-harness's.
"""
