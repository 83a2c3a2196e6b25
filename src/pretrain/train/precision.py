"""Numeric precision of the training step: autocast, fp32 master weights, the dynamic loss scaler.

- fp32: nothing to do.
- bf16: matmuls in bf16 under autocast, parameters and optimizer state stay fp32 (the master copy;
  lesson section 4c: a 1e-4 update to 1.0 rounds away in 16 bits). No loss scale: bf16 has fp32's range.
- fp16: as bf16 but with fp16's 5-bit exponent, so the loss is multiplied by S before backward and the
  gradients divided by S in fp32 afterwards (Micikevicius et al. 2017). S is dynamic: an inf/NaN
  gradient skips the step and halves S; `growth_interval` clean steps in a row double it.
- fp8: the blocks' matmuls take E4M3 weights and activations and E5M2 gradients, each tensor with its
  own scale (amax -> the format's max); needs a GPU with fp8 matmuls (sm_89+) for training. torch's
  CPU `_scaled_mm` runs the same arithmetic slowly, which is how the numerics are tested here.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from pretrain.errors import UserError

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_precision(name: str, device: torch.device) -> None:
    if name == "fp8":
        if device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 9):
            raise UserError("precision.dtype='fp8' needs a CUDA GPU with fp8 matmuls (compute capability "
                            ">= 8.9: Ada, Hopper, Blackwell); use 'bf16'")
        return
    if name not in DTYPES:
        raise UserError(f"precision.dtype must be one of fp32, bf16, fp16, fp8; got {name!r}")


def autocast(name: str, device: torch.device):
    """The forward pass's context: autocast to bf16/fp16 (weights stay fp32), or nothing for fp32.

    fp8 runs the blocks' linear layers through Float8Linear and everything else in bf16."""
    if name == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES.get(name, torch.bfloat16))


class DynamicLossScaler:
    """The fp16 loss scale S (lesson section 4b). Disabled (S = 1, never skips on scale) for fp32/bf16."""

    def __init__(self, enabled: bool, init_scale: float = 2.0**16, growth_interval: int = 2000,
                 backoff_factor: float = 0.5, growth_factor: float = 2.0):
        self.enabled = enabled
        self.scale = float(init_scale) if enabled else 1.0
        self.growth_interval, self.backoff, self.growth = growth_interval, backoff_factor, growth_factor
        self.clean_steps = 0
        self.skipped_steps = 0

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale if self.enabled else loss

    @torch.no_grad()
    def unscale_(self, params: list[torch.nn.Parameter]) -> None:
        """Divide gradients by S (gradients are fp32: autocast keeps parameters, hence grads, in fp32).

        Whether the step is finite is read off the global gradient norm afterwards (one pass, and
        already agreed across ranks by the clip's all-reduce), so no separate inf scan is needed.
        """
        if not self.enabled or self.scale == 1.0:
            return
        for g in [p.grad for p in params if p.grad is not None]:
            g.mul_(1.0 / self.scale)

    def update(self, finite: bool) -> bool:
        """Record one step's outcome; True when the optimizer should apply the step."""
        if not finite:
            if self.enabled:
                self.scale *= self.backoff
            self.clean_steps = 0
            self.skipped_steps += 1
            return False
        self.clean_steps += 1
        if self.enabled and self.clean_steps >= self.growth_interval:
            self.scale *= self.growth
            self.clean_steps = 0
        return True

    def state_dict(self) -> dict:
        return {"scale": self.scale, "clean_steps": self.clean_steps, "skipped_steps": self.skipped_steps}

    def load_state_dict(self, state: dict) -> None:
        self.scale, self.clean_steps = float(state["scale"]), int(state["clean_steps"])
        self.skipped_steps = int(state.get("skipped_steps", 0))


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def grads_finite(grads: list[torch.Tensor], group=None) -> bool:
    """No inf/NaN in any gradient shard, agreed by all ranks (one all-reduce of a flag)."""
    bad = torch.zeros((), dtype=torch.float32, device=grads[0].device if grads else "cpu")
    for g in grads:
        g = _local(g)
        if g.numel():
            bad = torch.maximum(bad, (~torch.isfinite(g)).any().float())
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(bad, op=dist.ReduceOp.MAX, group=group)
    return not bool(bad.item())


# --- fp8 (lesson 4d): E4M3 for weights and activations, E5M2 for gradients, one scale per tensor ---

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def to_fp8(t: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(t * s cast to fp8, 1/s) with s = fp8 max / amax(t): the tensor's largest value lands on the
    format's largest (448 for E4M3, 57,344 for E5M2); the inverse scale undoes it in the matmul."""
    fmax = torch.finfo(dtype).max
    amax = t.detach().abs().max().float().clamp(min=1e-12)
    scale = fmax / amax
    t8 = (t.float() * scale).clamp(-fmax, fmax).to(dtype)
    return t8, scale.reciprocal()


class _Fp8Linear(torch.autograd.Function):
    """y = x W^T with x, W in E4M3; backward with the output gradient in E5M2.

    Layouts follow cuBLASLt's rule for torch._scaled_mm (first operand row-major, second column-major).
    """

    @staticmethod
    def forward(ctx, x2d: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x8, sx = to_fp8(x2d, E4M3)
        w8, sw = to_fp8(w, E4M3)
        ctx.save_for_backward(x8, sx, w8, sw)
        ctx.w_dtype = w.dtype
        return torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x8, sx, w8, sw = ctx.saved_tensors
        g8, sg = to_fp8(g, E5M2)
        gx = torch._scaled_mm(g8, w8.t().contiguous().t(), scale_a=sg, scale_b=sw, out_dtype=torch.bfloat16)
        gw = torch._scaled_mm(g8.t().contiguous(), x8.t().contiguous().t(), scale_a=sg, scale_b=sx,
                              out_dtype=torch.float32)
        return gx, gw.to(ctx.w_dtype)


class Float8Linear(torch.nn.Linear):
    """A Linear whose matmul runs in fp8; the fp32 weight stays the master copy."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _Fp8Linear.apply(x.reshape(-1, x.shape[-1]), self.weight).reshape(*x.shape[:-1], -1)
        return y + self.bias.to(y.dtype) if self.bias is not None else y


def apply_fp8(model: torch.nn.Module) -> int:
    """Switch the transformer blocks' Linear layers to Float8Linear in place (same parameters, so the
    same checkpoint keys); embeddings, norms and the output head stay in higher precision, as in
    DeepSeek-V3. Layers whose sizes are not multiples of 16 (a cuBLASLt requirement) are left alone.
    Returns how many layers were switched."""
    n = 0
    for name, mod in model.named_modules():
        if type(mod) is torch.nn.Linear and "layers" in name and mod.in_features % 16 == 0 \
                and mod.out_features % 16 == 0:
            mod.__class__ = Float8Linear
            n += 1
    return n
