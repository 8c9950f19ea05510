"""Facts with their sources: the real tools' snapshots and releases, what releases require of each other, targets,
model families and shapes, methods, what DeepSpeed does with a JSON, bitsandbytes, ROCm's launcher variables, and
the generated rule catalog. The repository's pins and this machine's GPUs are read by `cfgopt.environment`."""
