#!/usr/bin/env python3
"""Rewrite fixtures/rules/*/*/expected.txt and fixed/ from cfgopt's current behaviour.

Run after changing a rule, then read `git diff fixtures/rules` before committing: the snapshot is only
as good as that review.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from rule_cases import all_cases, case_args, fix_in, input_files, job_folder, lint_blocks, render_expected, working_copy


def main(argv: list[str]) -> int:
    """`python scripts/update_rule_fixtures.py [CODE ...]`: only those rules' cases when codes are given."""
    wanted = {c.upper() for c in argv}
    for case in all_cases():
        if wanted and case.parent.name not in wanted:
            continue
        args = case_args(case)
        with job_folder(case) as folder:
            (case / "expected.txt").write_text(render_expected(lint_blocks(folder, args)))
        with tempfile.TemporaryDirectory() as tmp:
            work = working_copy(case, Path(tmp) / "case")
            fix_in(work, args)
            changed = [f for f in input_files(case) if (work / f.name).read_bytes() != f.read_bytes()]
            fixed_dir = case / "fixed"
            if fixed_dir.exists():
                shutil.rmtree(fixed_dir)
            if changed:
                fixed_dir.mkdir()
                for f in input_files(case):
                    shutil.copy2(work / f.name, fixed_dir / f.name)
        print(f"{case.relative_to(case.parent.parent)}: {'fixed/ written' if changed else 'no fix'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
