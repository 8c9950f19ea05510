"""The hardware table is the one place a device's figures live (verify's MFU reads it too)."""

from __future__ import annotations

from cfgopt.targets import TARGETS, target_for_device


def test_reported_device_names_map_to_targets() -> None:
    assert target_for_device("NVIDIA H200") is TARGETS["h200"]
    assert target_for_device("NVIDIA H100 80GB HBM3") is TARGETS["h100"]
    assert target_for_device("NVIDIA A100-SXM4-80GB") is TARGETS["a100"]
    assert target_for_device("AMD Instinct MI300X") is TARGETS["mi300x"]
    assert target_for_device("AMD Instinct MI250X / MI250") is TARGETS["mi250x"]
    assert target_for_device("NVIDIA GeForce RTX 4090") is None
    assert target_for_device("cpu") is None


def test_every_gpu_target_has_a_peak() -> None:
    assert all(t.peak_bf16_tflops > 0 for t in TARGETS.values() if t.platform != "cpu")
