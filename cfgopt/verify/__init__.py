"""`cfgopt verify`: run the real LLaMA-Factory trainer for a few steps on the original and the fixed config
and compare. Everything that imports torch, transformers or llamafactory lives in `worker.py` and
`synthetic.py`, which run in a child process; the parent (`runner.py`, `report.py`) stays light."""
