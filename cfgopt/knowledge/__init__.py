"""Facts with their sources: the real tools' snapshots and releases, pins, targets, model families and shapes,
methods, what DeepSpeed does with a JSON, bitsandbytes, ROCm's launcher variables, and the generated rule
catalog."""
