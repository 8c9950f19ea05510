#!/usr/bin/env python3
"""What DeepSpeed ZeRO-3's fp16 overflow check allocates: `python bench/memory/fp16_overflow_check.py` (a GPU).

ZeRO-3 with fp16 (not bf16) checks the whole 16-bit gradient partition for inf/NaN at the start of every step
(deepspeed 0.19.8, runtime/zero/stage3.py `_overflow_check_and_loss_scale_update` -> `has_overflow`:
`torch.isinf(self.grad_partitions_flat_buffer).any()`, then `torch.isnan(...)`). torch's `isinf` on a floating
tensor is `self.abs() == inf`: a 16-bit copy and a bool mask alive at once. This measures the peak above a 16-bit
buffer of 2^30 elements for isinf, isnan and the fp64 per-tensor norm of the gradient clipping, in bytes per
element, and prints one JSON line per operation. Measured on the H200 (torch 2.11): isinf 3.0, isnan 1.0,
fp64 norm 8.0 bytes per element, the same for fp16 and bf16 (bench/memory/raw/fp16_overflow_check.h200.jsonl).
"""

import json

import torch

n = 2**30
ops = {
    "isinf(x).any()": lambda x: torch.isinf(x).any(),
    "isnan(x).any()": lambda x: torch.isnan(x).any(),
    "x.to(float64).norm(2)": lambda x: x.to(torch.float64).norm(2),
}
for dt in (torch.float16, torch.bfloat16):
    x = torch.zeros(n, dtype=dt, device="cuda")
    for name, op in ops.items():
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        op(x)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        row = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": str(dt), "op": name}
        row.update(elements=n, peak_bytes=peak, bytes_per_element=round(peak / n, 3))
        print(json.dumps(row))
    del x
