"""Does fp16 mixed precision (torch's GradScaler, which accelerate's native AMP uses) run LLaMA-Factory 0.9.5's BAdam?

LLaMA-Factory keeps BAdam's trainable weights in the checkpoint's dtype (model/adapter.py L319; the model loads with
`torch_dtype: auto`, model/loader.py L155) and builds a BlockOptimizer over AdamW (train/trainer_utils.py L412-450).
The HF Trainer with `fp16: true` unscales through accelerate (`clip_grad_norm_` -> `unscale_gradients` ->
`scaler.unscale_(BlockOptimizer)`, then `scaler.step`), which reads the BlockOptimizer's `param_groups`: the model's
own weights (badam block_optim.py), not its fp32 copies. This runs that path on the CPU with a tiny model in each
checkpoint dtype. Run: `pip install --no-deps badam==1.2.2; python bench/verify/badam_fp16_scaler.py`.

Result (badam 1.2.2, torch 2.13.0 CPU, 2026-12-05):
    torch.float16: param_groups float16, base optimizer float32 -> ValueError: Attempting to unscale FP16 gradients.
    torch.bfloat16: param_groups bfloat16, base optimizer float32 -> ran, the active block changed
So the speed plan writes no `fp16: true` for BAdam (cfgopt/plan/space.py BADAM_FP16).
"""

from __future__ import annotations

import torch
from badam import BlockOptimizer
from torch import nn


class Tiny(nn.Module):
    """Names as a decoder's (`layers.N.`), so BAdam finds its blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(32, 16)
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(2)])
        self.lm_head = nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(x)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(h).float().logsumexp(-1).mean()


def one_step(dtype: torch.dtype) -> str:
    torch.manual_seed(0)
    model = Tiny().to(dtype)
    named = list(model.named_parameters())
    base = torch.optim.AdamW([{"params": [p for _, p in named], "weight_decay": 0.0}], lr=1e-3)
    opt = BlockOptimizer(base, named, switch_block_every=50, switch_mode="ascending", verbose=0)
    groups = {p.dtype for g in opt.param_groups for p in g["params"]}
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(model(torch.randint(0, 32, (4, 8)))).backward()
    before = model.layers[0].weight.detach().clone()
    try:
        scaler.unscale_(opt)  # what accelerate's clip_grad_norm_ does first
        scaler.step(opt)
    except ValueError as exc:
        return f"{dtype}: param_groups {groups} -> ValueError: {exc}"
    return f"{dtype}: param_groups {groups} -> ran, changed: {not torch.equal(before, model.layers[0].weight)}"


if __name__ == "__main__":
    for dtype in (torch.float16, torch.bfloat16):
        print(one_step(dtype))
