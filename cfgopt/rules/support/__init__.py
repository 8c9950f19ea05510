"""What rules share, by what it is about: LLaMA-Factory values (`llamafactory`), DeepSpeed sections
(`deepspeed`), a YAML and the DeepSpeed JSON it names (`cross_file`), the memory model for MEM and PF rules
(`memory_advice`) and the audit of choice fields (`choices`). Not rules: rule discovery looks only at
`cfgopt/rules/<code>_<name>.py`."""
