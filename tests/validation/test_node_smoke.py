"""Training smoke test: the model's size and FLOPs, checkpoint comparison, a 2-rank gloo run."""

from __future__ import annotations

from pathlib import Path

import torch

from validation.gpt import GPT, PRESETS, flops_per_token, parameter_count, synthetic_batch
from validation.smoke import _compare_state


def test_944m_preset_size_and_flops() -> None:
    cfg = PRESETS["gpt-944m"]
    with torch.device("meta"):
        model = GPT(cfg)
    n = parameter_count(model)
    # 2 x 32768 x 2048 (embedding, head) + 2048 x 2048 (positions) + 16 x 12 x 2048^2 + LayerNorms
    assert n == 2 * 32768 * 2048 + 2048 * 2048 + 16 * (12 * 2048**2 + 2 * 2048) + 2048
    assert 943e6 < n < 945e6
    assert flops_per_token(n, cfg) == 6 * n + 12 * 16 * 2048 * 2048


def test_synthetic_tokens_follow_their_rule() -> None:
    cfg = PRESETS["tiny"]
    gen = torch.Generator().manual_seed(0)
    x, y = synthetic_batch(cfg, gen, torch.device("cpu"))
    assert x.shape == y.shape == (cfg.micro_batch, cfg.seq_len)
    assert torch.equal(x[:, 1:], y[:, :-1])
    active = cfg.vocab_size // 8
    step = (y - x) % active
    assert int(step.min()) >= 1 and int(step.max()) <= 4
    assert int(x.max()) < active


def test_state_comparison_catches_one_flipped_bit() -> None:
    a = {"w": torch.randn(64), "opt": {"step": torch.tensor(3.0)}}
    b = {"w": a["w"].clone(), "opt": {"step": torch.tensor(3.0)}}
    assert _compare_state(a, b, "") == []
    b["w"].view(torch.int32)[7] ^= 1
    assert _compare_state(a, b, "") == ["w"]
    b["opt"]["step"] = torch.tensor(3.0, dtype=torch.float64)
    assert _compare_state(a, b, "") == ["opt.step", "w"]


def test_two_gloo_ranks_train_and_restore_exactly(run_module, tmp_path: Path) -> None:
    code, envelope, stderr = run_module(
        "smoke", "--local-procs", "2", "--cpu", "--steps", "8", "--warmup-steps", "2",
        "--checkpoint-dir", str(tmp_path), "--expect-world-size", "2", timeout=180,
    )
    assert code == 0 and envelope["status"] == "pass", (envelope["findings"], stderr[-2000:])
    details = envelope["details"]
    assert details["world_size"] == 2 and [r["rank"] for r in details["ranks"]] == [0, 1]
    for rank in details["ranks"]:
        assert rank["loss_finite"]
        assert rank["loss_last_window"] < rank["loss_first_window"]
        ck = rank["checkpoint"]
        assert ck["visible"] and ck["exact"] and ck["mismatched"] == [] and ck["tensors"] > 10
    assert str(tmp_path) in details["ranks"][1]["checkpoint"]["path"]
    assert list(tmp_path.iterdir()) == []  # rank 0 cleaned up after everyone compared
    node = next(m for m in envelope["measurements"] if m["figure"] == "smoke_tflops_per_node")
    assert node["value"] > 0 and node["samples"] == 6


def test_wrong_world_size_fails(run_module) -> None:
    code, envelope, _ = run_module("smoke", "--local-procs", "1", "--cpu", "--steps", "4", "--warmup-steps", "1",
                                   "--expect-world-size", "2", "--d-model", "32", "--layers", "1")
    assert code == 1 and envelope["status"] == "fail"
    assert any("world size 1, expected 2" in f["message"] for f in envelope["findings"])


def test_a_rank_that_raises_becomes_an_error_envelope(run_module) -> None:
    code, envelope, _ = run_module("smoke", "--local-procs", "1", "--cpu", "--steps", "2", "--warmup-steps", "5")
    assert code == 2 and envelope["status"] == "error"
    assert "rank 0 raised ValueError" in envelope["findings"][0]["message"]
    assert "Traceback" in envelope["details"]["traceback"]
