"""`cfgopt verify`: a CPU smoke run of the real LLaMA-Factory trainer (oracle group: needs llamafactory),
and unit tests of the launcher's pieces and the report (no trainer needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rule_cases import ROOT
from sampling import params
from tiny_model import TINY
from verify_runs import VerifyRun

from cfgopt.verify import comparison, runner, synthetic_meta

CONFIG = """model_name_or_path: tiny
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: alpaca_en_demo
template: llama3
cutoff_len: 256
output_dir: {out}
per_device_train_batch_size: 2
learning_rate: 1.0e-4
flash_attn: {flash}
"""


def _write_case(tmp_path: Path, flash: str) -> Path:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(json.dumps(TINY))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG.format(out=tmp_path / "users_output_dir", flash=flash))
    return cfg


@pytest.mark.oracle
def test_cpu_smoke_run_of_the_real_trainer(neat_packed_fix_run: VerifyRun) -> None:
    """The seed's mistake (`flash_attn: true`) crashes the real trainer at model load; verify fixes it to sdpa
    and the fixed config trains. The run is tests/verify/conftest.py's, shared with test_verify_tokens.py."""
    proc, data = neat_packed_fix_run.proc, neat_packed_fix_run.report
    assert "Unknown attention type: True" in data["original"]["error"]  # the real model-load crash
    fixed = data["fixed"]
    assert fixed.get("error") is None, proc.stderr[-3000:]
    assert fixed["steps_measured"] >= 2 and fixed["real_tokens_per_s"] > 0
    assert fixed["attn_implementation"] == "sdpa" and fixed["loss_finite"]
    assert any("LF003" in f for f in data["fixes"])
    assert proc.returncode == 0  # the original crashed and the fixed config trains: what verify is for
    assert not (neat_packed_fix_run.folder / "users_output_dir").exists()  # never writes into the user's output_dir


FULL_CONFIG = """model_name_or_path: tiny
stage: sft
do_train: true
finetuning_type: full
dataset: alpaca_en_demo
template: llama3
cutoff_len: 256
output_dir: out
per_device_train_batch_size: 2
gradient_accumulation_steps: 2
learning_rate: 1.0e-3
seed: 7
"""


@pytest.mark.oracle
def test_cpu_smoke_run_compares_the_loss_step_by_step(tmp_path: Path, verify_cache: Path) -> None:
    """Original vs a fixed config with another optimizer, micro-batch split and seed, through the real runner
    and trainer: verify gives both runs the original's seed and data order, so step 1 (before any update)
    has the same loss, and the steps are compared one to one, loss and grad norm."""
    pytest.importorskip("llamafactory")
    cfg = _write_case(tmp_path, "sdpa")
    cfg.write_text(FULL_CONFIG)
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(
        FULL_CONFIG.replace("per_device_train_batch_size: 2", "per_device_train_batch_size: 4")
        .replace("gradient_accumulation_steps: 2", "gradient_accumulation_steps: 1")
        .replace("seed: 7", "seed: 99\noptim: adafactor")
    )
    command = [sys.executable, "-m", "cfgopt", "verify", str(cfg), "--fixed", str(fixed), "--steps", "3"]
    command += ["--target", "cpu", "--mode", "synthetic", "--cache-dir", str(verify_cache)]
    proc = subprocess.run(
        [*command, "--json", str(tmp_path / "report.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "DISABLE_VERSION_CHECK": "1", "PYTHONPATH": str(ROOT)},
    )
    data = json.loads((tmp_path / "report.json").read_text())
    loss = data["comparison"]["loss"]
    assert loss["method"] == "per step" and loss["steps_compared"] == 3, proc.stderr[-3000:]
    assert data["data_order"] == {"seed": 7, "data_seed": None}
    first = [data["losses"][label][0] for label in ("original", "fixed")]
    assert first[0]["loss"] == pytest.approx(first[1]["loss"], rel=1e-4)  # same weights, same samples
    assert all("grad_norm" in entry for entry in first)
    assert loss["passed"] and loss["status"] in ("within", "lower")
    # the fix changes the optimizer: the original ran a second time with another seed, whose spread widens the
    # tolerance where it is larger (--spread auto)
    assert "original, another seed" in data["losses"] and "spread" in loss and loss["judged_window"] == [3, 3]
    assert "loss comparison, per step" in proc.stdout and "loss verdict:" in proc.stdout


@pytest.mark.oracle
@pytest.mark.slow  # about a minute; the step-by-step smoke run above covers the real path by default
def test_cpu_smoke_run_of_a_pure_bf16_plan_prints_the_loss_verdict(tmp_path: Path) -> None:
    """Issue 23's "done when", on a CPU: a full fine-tune planned for an H200 gets a pure_bf16 plan (with
    packing, so compared smoothed), and verify prints the loss comparison, its verdict and that a CPU run
    cannot exercise the precision change."""
    pytest.importorskip("llamafactory")
    cfg = _write_case(tmp_path, "sdpa")
    cfg.write_text(FULL_CONFIG + "bf16: true\n")
    command = [sys.executable, "-m", "cfgopt", "verify", str(cfg), "--steps", "3", "--target", "h200", "--gpus", "1"]
    command += ["--mode", "synthetic", "--cache-dir", str(tmp_path / "cache"), "--json", str(tmp_path / "r.json")]
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    data = json.loads((tmp_path / "r.json").read_text())
    assert any("pure bf16" in fix for fix in data["fixes"]), data["fixes"]
    loss = data["comparison"]["loss"]
    assert loss["steps_compared"] == 3 and loss["passed"], proc.stderr[-3000:]
    assert "loss comparison" in proc.stdout and "loss verdict: passes" in proc.stdout
    assert "change of precision (pure_bf16, fp16) is not exercised" in proc.stdout


def test_plan_assets_synthetic_for_unknown_local_model(tmp_path: Path) -> None:
    cfg = _write_case(tmp_path, "sdpa")
    assets = runner.plan_assets(
        {"model_name_or_path": "tiny", "dataset": "x", "template": "mistral"}, cfg, "auto", tmp_path / "cache"
    )
    assert assets.model_config == TINY and assets.dataset == synthetic_meta.ALPACA.dataset
    assert assets.template == "llama3"
    with pytest.raises(ValueError, match="local folder"):
        runner.plan_assets({"model_name_or_path": "org/unknown-model"}, cfg, "auto", tmp_path / "cache")
    shaped = runner.plan_assets({"model_name_or_path": "meta-llama/Meta-Llama-3-8B"}, cfg, "auto", tmp_path / "c")
    assert shaped.model_config["hidden_size"] == 4096 and shaped.model_config["num_hidden_layers"] == 32


def test_plan_assets_says_when_real_data_meets_the_synthetic_tokenizer(tmp_path: Path) -> None:
    """The job's own dataset with a stand-in model: verify says its tokens are the synthetic tokenizer's."""
    cfg = _write_case(tmp_path, "sdpa")
    data = tmp_path / "data"
    data.mkdir()
    (data / "dataset_info.json").write_text('{"mine": {"file_name": "mine.json"}}')
    config = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B", "dataset": "mine", "dataset_dir": str(data)}
    own = runner.plan_assets(config, cfg, "auto", tmp_path / "cache")
    assert own.dataset is None and runner.OWN_DATA_SYNTHETIC_TOKENIZER in own.notes
    synthetic = runner.plan_assets({**config, "dataset": "absent"}, cfg, "auto", tmp_path / "cache")
    assert runner.OWN_DATA_SYNTHETIC_TOKENIZER not in synthetic.notes


def test_run_is_killed_as_a_process_group_on_timeout(tmp_path: Path) -> None:
    script = (
        "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print('grandchild', p.pid, flush=True); time.sleep(60)"
    )
    code, tail = runner._run([sys.executable, "-c", script], tmp_path / "log", timeout=2)
    assert code == 124 and "timeout" in tail
    # the whole group was killed: the grandchild too, not only the process _run started
    grandchild = int(tail.split("grandchild ", 1)[1].split()[0])
    assert not _alive(grandchild)


def test_report_summary_and_comparison() -> None:
    steps = [
        {"step": i, "seconds": 1.0, "real_tokens": 1000, "padded_tokens": 1200, "supervised_tokens": 700}
        for i in range(1, 9)
    ]
    before = comparison.summarize(
        {
            "steps": steps,
            "parameters": 8e9,
            "trainable_parameters": 2e7,
            "peak_tflops": 989.4,
            "losses": [{"step": 1, "loss": 12.0}, {"step": 8, "loss": 11.0}],
        }
    )
    faster = [dict(s, seconds=0.5) for s in steps]
    after = comparison.summarize(
        {"steps": faster, "parameters": 8e9, "trainable_parameters": 2e7, "peak_tflops": 989.4}
    )
    assert before["real_tokens_per_s"] == pytest.approx(1000)
    assert before["mfu"] == pytest.approx((4 * 8e9 + 2 * 2e7) * 1000 / 989.4e12)
    verdict = comparison.compare(before, after)
    assert verdict["status"] == "faster" and verdict["speedup"] == pytest.approx(2.0)
    assert comparison.compare(after, before)["status"] == "slower"
    assert "original" in comparison.table(before, after, verdict)
    assert comparison.compare({"error": "x"}, after)["status"] == "crash"


def test_assets_are_built_in_a_temporary_folder_and_renamed(tmp_path: Path) -> None:
    from cfgopt.verify import synthetic

    final = tmp_path / "cache" / "model-abc"

    def crash(folder: Path) -> None:
        (folder / "config.json").write_text("{}")
        raise KeyboardInterrupt  # interrupted half-way

    with pytest.raises(KeyboardInterrupt):
        synthetic.build_into(final, crash)
    assert not final.exists() and list(final.parent.iterdir()) == []  # nothing left behind
    (final.parent / ".model-abc.building-x1").mkdir()  # what a build killed outright leaves
    synthetic.remove_partial(final)
    assert list(final.parent.iterdir()) == []
    assert synthetic.build_into(final, lambda folder: (folder / "config.json").write_text("{}")) == 2
    assert (final / "config.json").exists() and [p.name for p in final.parent.iterdir()] == ["model-abc"]


def test_cpu_runs_only_for_models_that_fit_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cfgopt.verify import preflight, synthetic

    monkeypatch.setattr(synthetic, "available_memory_bytes", lambda: 23 * 1024**3)
    cfg = _write_case(tmp_path, "sdpa")
    big = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct", "finetuning_type": "lora"}
    assert "needs about 62 GiB of memory, 23 GiB available" in preflight.cpu_blocker(big, cfg, tmp_path / "c")
    assert preflight.cpu_blocker({"model_name_or_path": "tiny"}, cfg, tmp_path / "c") is None


def _no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, config_text: str, mode: str) -> tuple[int | None, str]:
    import argparse

    from cfgopt.verify import preflight

    pytest.importorskip("llamafactory")
    monkeypatch.setattr(preflight, "accelerator", lambda: None)
    cfg = _write_case(tmp_path, "sdpa")
    cfg.write_text(config_text)
    args = argparse.Namespace(config=cfg, mode=mode, cache_dir=tmp_path / "cache")
    return preflight.check(args, "verify"), str(cfg)


def test_no_gpu_stops_before_anything_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    code, _ = _no_gpu(monkeypatch, tmp_path, CONFIG.format(out="o", flash="sdpa"), "auto")
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("cfgopt verify: no GPU here") and "--mode synthetic runs a random-init" in err
    from cfgopt.verify import preflight

    monkeypatch.setattr(preflight, "accelerator", lambda: "NVIDIA H200 (CUDA)")
    assert preflight.check(argparse_namespace(tmp_path / "cfg.yaml", "auto"), "verify") is None
    assert not (tmp_path / "cache").exists()


def argparse_namespace(config: Path, mode: str):
    import argparse

    return argparse.Namespace(config=config, mode=mode, cache_dir=config.parent / "cache")


def test_no_gpu_message_never_suggests_what_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A model whose shape is unknown, or too big for this machine, cannot run synthetic on a CPU either: the
    message says why and does not send the user to --mode synthetic; asked for, it stops at once (exit 2)."""
    from cfgopt.verify import synthetic

    unknown = CONFIG.format(out="o", flash="sdpa").replace("model_name_or_path: tiny", "model_name_or_path: org/x")
    big = CONFIG.format(out="o", flash="sdpa").replace(
        "model_name_or_path: tiny", "model_name_or_path: Qwen/Qwen2.5-7B"
    )
    for name, text, why in (("unknown", unknown, "shape is unknown"), ("big", big, "GiB of memory")):
        for mode in ("auto", "synthetic"):
            (tmp_path / name / mode).mkdir(parents=True)
            monkeypatch.setattr(synthetic, "available_memory_bytes", lambda: 23 * 1024**3)
            code, _ = _no_gpu(monkeypatch, tmp_path / name / mode, text, mode)
            err = capsys.readouterr().err
            assert code == 2 and why in err and "--mode synthetic runs" not in err, err
            assert len(err.splitlines()) == 1 and not (tmp_path / name / mode / "cache").exists()  # nothing built


def test_cpu_runs_override_half_precision_and_say_so(tmp_path: Path) -> None:
    """Every LLaMA-Factory example has `bf16: true`, which transformers refuses on a CPU: the CPU runs use
    fp32, both of them, and the notes say so; a GPU run keeps the config's precision."""
    cfg = _write_case(tmp_path, "sdpa")
    config = {"model_name_or_path": "tiny", "dataset": "x", "template": "llama3", "bf16": True, "fp16": False}
    on_cpu = runner.plan_assets(config, cfg, "synthetic", tmp_path / "cache", on_cpu=True)
    assert on_cpu.overrides == {"bf16": False}
    assert "bf16: false for every run (fp32" in on_cpu.override_notes[0]
    on_gpu = runner.plan_assets(config, cfg, "synthetic", tmp_path / "cache", on_cpu=False)
    assert on_gpu.overrides == {} and on_gpu.override_notes == []
    assert runner.bytes_to_build(on_cpu) > 0 and not (tmp_path / "cache").exists()


def test_cache_folder_default_size_and_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cfgopt.verify import cache
    from cfgopt.verify.options import default_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "cfgopt" / "verify"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the spec: only an absolute path counts
    assert default_cache_dir() == Path.home() / ".cache" / "cfgopt" / "verify"
    folder = tmp_path / "shared-cache"
    (folder / "model-0123456789ab").mkdir(parents=True)
    (folder / "model-0123456789ab" / "model.safetensors").write_bytes(b"x" * 5000)
    (folder / "data").mkdir()
    (folder / ".model-0123456789ab.building-x1").mkdir()
    (folder / "users-own-file.txt").write_text("kept")
    assert cache.used_bytes(folder) == 5000
    assert "(5.0 KB)" in cache.summary(folder) and "--clear-cache" in cache.summary(folder)
    assert cache.clear(folder) == (3, 5000)
    assert [p.name for p in folder.iterdir()] == ["users-own-file.txt"]  # only cfgopt's entries go


def test_clear_cache_from_the_command_line(tmp_path: Path) -> None:
    from rule_cases import run_cli

    folder = tmp_path / "c"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "x.json").write_text("[]")
    code, _, err = run_cli(["verify", "--clear-cache", "--cache-dir", str(folder)])
    assert code == 0 and "removed 1 cached item(s)" in err and not folder.exists()
    code, _, err = run_cli(["tune", "--clear-cache", "--cache-dir", str(folder)])
    assert code == 0 and "nothing cached" in err
    with pytest.raises(SystemExit) as exit_info:  # a usage error: argparse's exit
        run_cli(["verify"])
    assert exit_info.value.code == 2


def test_report_says_when_no_run_reached_a_device() -> None:
    crashed = comparison.summarize({"error": "ValueError: x"})
    text = comparison.table(crashed, crashed, comparison.compare(crashed, crashed))
    assert "None" not in text.split("device:")[1] and "not reached" in text


# ---------------------------------------------------------------- SIGTERM / SIGHUP: nothing left behind

FAKE_WORKER = """import json, os, subprocess, sys, time
spec = json.load(open(sys.argv[1]))
if spec.get("model_dir"):  # a half-built model, as the real builder leaves it while it works
    model = spec["model_dir"]
    os.makedirs(os.path.join(os.path.dirname(model), "." + os.path.basename(model) + ".building-fake"))
sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
children = [subprocess.Popen(sleeper) for _ in range(2)]
children.append(subprocess.Popen(sleeper, start_new_session=True))  # as torchrun starts its workers
spawner = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(120)"
children.append(subprocess.Popen([sys.executable, "-c", spawner, *sleeper]))  # and a grandchild
time.sleep(1)
pids = [os.getpid()] + [c.pid for c in children]
with open(os.environ["FAKE_PIDS"] + ".tmp", "w") as out:
    out.write(" ".join(map(str, pids)))
os.replace(os.environ["FAKE_PIDS"] + ".tmp", os.environ["FAKE_PIDS"])
time.sleep(120)
"""

DRIVER = """import sys
from cfgopt.environment import probe
from cfgopt.verify import preflight, runner

# the real command, with the trainer replaced by FAKE_WORKER and no GPU or package probing
preflight.check = lambda args, command: None
probe.probe_platform = lambda *a, **k: probe.Platform()
runner.worker_command = lambda mode, spec, torchrun=None: [sys.executable, sys.argv[1], str(spec)]
from cfgopt.cli import main

sys.exit(main(sys.argv[2:]))
"""


def _alive(pid: int) -> bool:
    from cfgopt.verify.processes import _start_time

    return _start_time(pid) is not None  # a zombie (dead, not yet reaped) counts as gone


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the processes in /proc")
@pytest.mark.parametrize(
    ("command", "signame"),
    [
        ("verify", "SIGTERM"),
        ("tune", "SIGHUP"),
        *params([("verify", "SIGHUP"), ("verify", "SIGINT"), ("tune", "SIGTERM")], 0),  # with --full
    ],
)
def test_termination_kills_every_child_and_removes_the_temp_folder(tmp_path: Path, command: str, signame: str) -> None:
    """A CI timeout sends SIGTERM: the trainer, its children (also one in a session of its own, as torchrun's
    workers are) and a grandchild are killed, the temporary work folder and the half-built model removed."""
    import signal

    cfg = _write_case(tmp_path, "sdpa")
    (tmp_path / "fake_worker.py").write_text(FAKE_WORKER)
    (tmp_path / "driver.py").write_text(DRIVER)
    temp, pids_file, cache_dir = tmp_path / "tmp", tmp_path / "pids", tmp_path / "cache"
    temp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp), "FAKE_PIDS": str(pids_file)}
    cmd = [sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "fake_worker.py"), command, str(cfg)]
    cmd += ["--mode", "synthetic", "--target", "cpu", "--cache-dir", str(cache_dir)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not pids_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pids_file.exists(), proc.communicate(timeout=30)[1][-3000:] if proc.poll() is not None else "no start"
        pids = [int(p) for p in pids_file.read_text().split()]
        assert len(pids) == 5 and [p for p in pids if not _alive(p)] == []
        assert [p.name for p in temp.iterdir() if p.name.startswith("cfgopt-")]  # the work folder, while it runs
        proc.send_signal(getattr(signal, signame))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + getattr(signal, signame), err[-3000:]
        assert ("interrupted" if signame == "SIGINT" else f"terminated ({signame})") in err
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in pids if _alive(p)] == []
        assert [p.name for p in temp.iterdir() if p.name.startswith("cfgopt-")] == []
        assert [p.name for p in cache_dir.iterdir() if "building" in p.name] == []
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def test_interrupt_guard_raises_once_and_restores_the_handlers(tmp_path: Path) -> None:
    """SIGTERM becomes `Terminated` (exit 143) inside the guard; a second signal while cleaning up is ignored;
    the old handlers come back after it."""
    import signal

    from cfgopt.text import termination
    from cfgopt.verify import processes

    before = signal.getsignal(signal.SIGTERM)
    with termination.interrupt_on_termination():
        with pytest.raises(termination.Terminated) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode boundary
        assert termination.exit_code(caught.value) == 143 and "SIGTERM" in termination.describe(caught.value)
        os.kill(os.getpid(), signal.SIGHUP)  # during clean-up: ignored
        time.sleep(0.1)
    assert signal.getsignal(signal.SIGTERM) is before
    folder = tmp_path / "work"
    (folder / "a").mkdir(parents=True)
    processes.remove_folder(folder)
    assert not folder.exists()
