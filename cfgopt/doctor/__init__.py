"""`cfgopt doctor [CONFIG...]`: the environment a job will run in, read on the training node without importing
the heavy packages, checked against each config (docs/doctor.md).

- `cfgopt/environment/node.py`: what is installed and present (`read_stack`): Python, the distributions from their
  dist-info folders (`Stack.environment`, the one `Environment` type), torch's build from `torch/version.py`,
  compiled extension files (flash-attn, DeepSpeed's prebuilt ops), the ROCm / CUDA release from
  `/opt/rocm/.info/version` / `/usr/local/cuda/version.json`, the GPUs from /proc and /sys
  (`cfgopt.environment.gpus`), the launcher's environment variables; every path under a root (tests: fake trees).
- `checks.py`: the findings for one job (DOC001-DOC013), each one line with a code, as `lint` reports.
- `command.py`: the subcommand: configs found as `lint` finds them, findings rendered in lint's formats, and a
  summary of the stack.
"""
