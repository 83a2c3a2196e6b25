"""The training loop: model, data, precision, stability, checkpoints, metrics (see docs/training.md).

Heavy imports (torch) live in the submodules; `pretrain.train.config` alone imports no torch.
"""
