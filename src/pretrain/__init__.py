"""pretrain: from a web crawl to a base model.

Curation belt (`pretrain.curate`), token shards and mixtures (`pretrain.tokens`), the planner's
arithmetic (`pretrain.plan`), the training loop (`pretrain.train`), float-format emulation
(`pretrain.numerics`) and the lesson's walkthrough (`pretrain.tour`).
"""

__version__ = "0.1.0"
