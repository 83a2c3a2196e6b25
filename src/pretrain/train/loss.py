"""The training loss over the output head, whole or in chunks of tokens (`train.loss_chunks`).

The whole loss, F.cross_entropy(logits.float()) on the head's (B, T, V) output, holds 12 bytes per
vocabulary entry per token at its peak in backward (plan/memory.py, LOSS_BYTES_PER_VOCAB): 12 GB for
Llama 3's 128,256 entries at 8,192 tokens per micro-batch. Chunked, the head matmul, the fp32
upcast, log-softmax and the loss run on T·B/N tokens at a time and only the chunk's input is saved;
backward recomputes each chunk (torch.utils.checkpoint, non-reentrant), so the vocabulary-sized
term is divided by N at the cost of running the head twice. The same idea as torchtune's chunked
cross-entropy (which chunks the logits of an unchunked head) and Liger-Kernel's fused linear
cross-entropy (which computes the gradients in forward, a Triton kernel): here with torch alone.

The chunked path runs inside the model's forward (Transformer.forward with targets), so FSDP2's
unsharding and DDP's gradient hooks wrap it as they wrap the whole loss. It needs the head as one
plain matrix on the process: tensor parallelism splits it over the vocabulary (its module's hooks
gather the logits) and a pipeline's schedule calls the loss on the last stage's output; both are
refused in one line (`check_layout`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from pretrain.errors import UserError


def check_layout(chunks: int, dims) -> None:
    """Refuse train.loss_chunks > 1 where the head is not this process's plain matrix."""
    if chunks <= 1:
        return
    why = {"tp": "the head is split over the vocabulary and its logits gathered by the module's hooks",
           "pp": "the pipeline schedule calls the loss on the last stage's logits"}
    for dim, reason in why.items():
        if getattr(dims, dim) > 1:
            raise UserError(f"train.loss_chunks={chunks} needs parallel.{dim}=1 ({reason}): "
                            "use train.loss_chunks=1 with this layout")


def _chunk_loss(h: torch.Tensor, weight: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Summed fp32 cross-entropy of one chunk's tokens, the head run under the caller's autocast."""
    return F.cross_entropy(F.linear(h, weight).float(), y, reduction="sum")


def chunked_cross_entropy(h: torch.Tensor, weight: torch.Tensor, y: torch.Tensor,
                          chunks: int) -> torch.Tensor:
    """Mean cross-entropy of F.linear(h, weight) against y over all tokens, `chunks` tokens-slices at
    a time; each slice's logits exist only while its forward, then its backward, runs."""
    h, y = h.flatten(0, -2), y.flatten()
    total = torch.zeros((), dtype=torch.float32, device=h.device)
    for hc, yc in zip(h.tensor_split(chunks), y.tensor_split(chunks), strict=True):
        # non-reentrant: recomputes under the forward's autocast state, saves only hc (a view of h)
        total = total + checkpoint(_chunk_loss, hc, weight, yc, use_reentrant=False)
    return total / y.numel()
