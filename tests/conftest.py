import sys
from pathlib import Path

# tests/ holds shared helpers (rule_cases.py, oracle_harness.py) imported by the test modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))
