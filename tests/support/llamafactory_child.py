"""One Python child for the tests that run LLaMA-Factory's own code on a few rows (its data converters, its
collator's attention masks).

LLaMA-Factory's data package imports torchaudio (data/mm_plugin.py), which this host may lack: the code runs in
a child with the verify worker's placeholder for it, so the test process's modules stay as they are. Importing
torch, transformers and LLaMA-Factory takes the child about 5 s on 2 cores, and each script then runs in
well under one: tests/verify/conftest.py starts the child once a session, and it runs each test's script in turn,
each with fresh globals and its own argv, what it prints and its exit status returned as a `Done`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from repo_paths import ROOT

# The answer's line starts with MARK: a line a library writes straight to the real stdout is no answer.
MARK = "cfgopt-llamafactory-child "

SERVE = f"""
import contextlib, io, json, sys, traceback
from cfgopt.verify.worker import _torchaudio_placeholder
_torchaudio_placeholder()
answers = sys.stdout
for line in sys.stdin:
    request = json.loads(line)
    out, err, code = io.StringIO(), io.StringIO(), 0
    sys.argv = ["-c", *request["argv"]]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(request["script"], "<script>", "exec"), {{"__name__": "__main__"}})
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    done = {{"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}}
    answers.write({MARK!r} + json.dumps(done) + "\\n")
    answers.flush()
"""


@dataclass(frozen=True)
class Done:
    """A script's run, as `subprocess.run` reports one: its exit status, what it printed, what it wrote to stderr
    (a traceback when it raised)."""

    returncode: int
    stdout: str
    stderr: str


class LlamaFactoryChild:
    """The child: `run(script, *argv)` as `python -c script *argv` would, in one process for every script."""

    def __init__(self, log: Path) -> None:
        self._log_path = log
        self._log = log.open("w")  # what the libraries write to the real stderr (progress bars, warnings)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DISABLE_VERSION_CHECK": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, "-c", SERVE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()  # so that a silent child cannot block a timeout

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)  # the child ended

    def run(self, script: str, *argv: str, timeout: float = 600) -> Done:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps({"script": script, "argv": list(argv)}) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"the LLaMA-Factory child ended: {self._log_path.read_text()[-3000:]}") from None
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                self.close()
                raise TimeoutError(f"the LLaMA-Factory child gave no answer in {timeout:g} s") from None
            if line is None:
                raise RuntimeError(f"the LLaMA-Factory child ended: {self._log_path.read_text()[-3000:]}")
            if line.startswith(MARK):
                return Done(**json.loads(line[len(MARK) :]))

    def close(self) -> None:
        """Stop the child: it holds nothing to save, and its interpreter's own exit (torch's) takes a second."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):  # it had ended already
                self._proc.stdin.close()
        self._proc.kill()
        self._proc.wait()
        self._log.close()
