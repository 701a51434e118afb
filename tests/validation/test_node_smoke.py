"""Training smoke test: the model's size and FLOPs, checkpoint comparison, a 2-rank gloo run."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from validation.checkpoint import REPLICA_RTOL, _differences, checkpoint_findings
from validation.gpt import GPT, PRESETS, GPTConfig, flops_per_token, parameter_count, synthetic_batch
from validation.result import Report
from validation.smoke import loss_spikes


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
    step = (y - x) % cfg.classes
    assert int(step.min()) >= 1 and int(step.max()) <= 4
    seen = torch.cat([synthetic_batch(cfg, gen, torch.device("cpu"))[0].flatten() for _ in range(8)]).unique()
    assert len(seen) == cfg.classes == cfg.vocab_size  # the CPU preset uses its whole vocabulary
    assert PRESETS["gpt-944m"].classes == 4096  # an eighth of 32768


def test_the_loss_is_over_the_ids_the_data_uses_and_no_other() -> None:
    # Ids the data never uses get no gradient at all: nothing can push them down along a shared
    # direction that an Adam step could flip (the step-15 spike, bench/gpu/spike.md).
    cfg = GPTConfig(vocab_size=64, seq_len=8, n_layer=1, n_head=2, d_model=16, micro_batch=4, lr=1e-3, data_vocab=16)
    torch.manual_seed(0)
    model = GPT(cfg)
    x, y = synthetic_batch(cfg, torch.Generator().manual_seed(1), torch.device("cpu"))
    assert int(x.max()) < 16 and int(y.max()) < 16
    loss = model(x, y)
    loss.backward()
    assert model.head.weight.grad is not None
    assert float(model.head.weight.grad[16:].abs().max()) == 0.0 and float(model.head.weight.grad[:16].abs().max()) > 0
    full = GPT(replace(cfg, data_vocab=0))
    full.load_state_dict(model.state_dict())
    assert float(full(x, y).detach()) > float(loss.detach())  # over 64 classes the same logits give a higher loss


# Rank 0's loss per step in four validate --local runs on 2 x H200 (bench/results/2026-11-29-*-run{3,4,5,6}.json),
# with the data that left 7/8 of the vocabulary unseen: the step-15 spike, then a milder one in run 3.
H200_RUN3 = [
    10.8,
    10.44,
    10.18,
    9.98,
    9.76,
    9.49,
    9.21,
    8.94,
    8.71,
    8.55,
    8.45,
    8.4,
    8.37,
    8.36,
    8.37,
    17.78,
    8.37,
    8.39,
]
HEALTHY_CPU = [6.26, 6.22, 6.14, 6.09, 6.05, 5.97, 5.93, 5.84, 5.62, 5.53]
# The 944M preset on one H200 with every id in the data (bench/gpu/spike.md, variant fullvocab): a slow, noisy fall.
HEALTHY_FULLVOCAB = [10.8, 10.79, 10.74, 10.67, 10.62, 10.63, 10.55, 10.49, 10.4, 10.46, 10.52, 10.46, 10.37, 10.47]


def test_the_h200_step_15_spike_is_named() -> None:
    spikes = loss_spikes(H200_RUN3)
    assert [s["step"] for s in spikes] == [15]
    assert spikes[0]["loss"] == 17.78 and spikes[0]["low"] == 8.36


@pytest.mark.parametrize("curve", [HEALTHY_CPU, HEALTHY_FULLVOCAB, [5.0], []])
def test_healthy_curves_have_no_spike(curve: list[float]) -> None:
    assert loss_spikes(curve) == []


def test_a_nan_step_is_not_a_spike_but_what_follows_is_judged() -> None:
    # NaN is the finite-loss check's finding; the next finite steps are still compared with the low.
    assert [s["step"] for s in loss_spikes([10.0, 8.0, float("nan"), 12.0])] == [3]


def test_a_too_high_learning_rate_fails_the_smoke_with_the_spike(run_module) -> None:
    # lr 0.1 without clipping overshoots on the tiny CPU model: loss 4.6 -> 11.2 for one step.
    code, envelope, stderr = run_module(
        "smoke", "--local-procs", "1", "--cpu", "--steps", "12", "--lr", "0.1", "--clip-grad", "0", timeout=180
    )
    errors = [f["message"] for f in envelope["findings"] if f["severity"] == "error"]
    assert code == 1 and any("loss spiked at step" in e for e in errors), (errors, stderr[-2000:])
    assert len(envelope["details"]["grad_norm_rank0"]) == 12


def test_state_comparison_catches_one_flipped_bit() -> None:
    a = {"w": torch.randn(64), "opt": {"step": torch.tensor(3.0)}}
    b = {"w": a["w"].clone(), "opt": {"step": torch.tensor(3.0)}}
    assert _differences(a, b, "") == []
    b["w"].view(torch.int32)[7] ^= 1
    (w,) = _differences(a, b, "")
    assert w["name"] == "w" and w["elements"] == 1 and w["of"] == 64 and 0 < w["relative"] < 1e-5
    b["opt"]["step"] = torch.tensor(3.0, dtype=torch.float64)
    assert [d["name"] for d in _differences(a, b, "")] == ["opt.step", "w"]
    assert _differences(a, b, "")[0]["relative"] == math.inf


def _rank(rank: int, **checkpoint: object) -> dict:
    ck = {"visible": True, "exact": True, "sha256": "ab", "read_bytes": 10, "replica_differences": []}
    ck.update(checkpoint)
    return {"rank": rank, "host": f"node{rank}", "checkpoint": ck}


def _judged(*ranks: dict) -> list[tuple[str, str | None, str]]:
    report = Report("smoke")
    checkpoint_findings(report, list(ranks), lambda r: r["host"])
    return [(f.severity, f.device, f.message) for f in report.findings]


def test_every_rank_agreeing_with_the_writer_is_no_finding() -> None:
    assert _judged(_rank(0, bytes=10), _rank(1), _rank(2)) == []


def test_a_rank_served_other_bytes_is_named_for_the_storage() -> None:
    (finding,) = _judged(_rank(0, bytes=10), _rank(1, sha256="cd", read_bytes=4096), _rank(2))
    assert finding[:2] == ("error", "node1") and "shared storage served other content" in finding[2]


def test_a_restore_that_is_not_exact_fails_that_rank() -> None:
    diff = {"name": "model.w", "elements": 3, "of": 64, "relative": 0.5}
    (finding,) = _judged(_rank(0, bytes=10), _rank(1, exact=False, restore_differences=[diff]))
    assert finding[:2] == ("error", "node1") and "not bit-exact: model.w (3 of 64 elements" in finding[2]


def test_a_replica_apart_from_rank_0s_fails_unless_by_rounding_only() -> None:
    far = {"name": "model.w", "elements": 40, "of": 64, "relative": 0.01}
    near = {"name": "model.tok_emb.weight", "elements": 2, "of": 32768, "relative": 3e-7}
    judged = _judged(
        _rank(0, bytes=10),
        _rank(1, replica_differences=[far], replica_max_relative=0.01),
        _rank(2, replica_differences=[near], replica_max_relative=3e-7),
    )
    assert [(s, d) for s, d, _ in judged] == [("error", "node1"), ("warning", "node2")]
    assert "diverged from rank 0's: model.w" in judged[0][2] and "rounding level" in judged[1][2]
    assert 3e-7 < REPLICA_RTOL < 0.01


def test_the_writer_whose_file_differs_from_its_model_fails_at_any_size() -> None:
    near = {"name": "model.w", "elements": 1, "of": 64, "relative": 1e-9}
    (finding,) = _judged(_rank(0, bytes=10, replica_differences=[near], replica_max_relative=1e-9))
    assert finding[:2] == ("error", "node0") and "does not hold what rank 0 saved" in finding[2]


def test_two_gloo_ranks_train_and_restore_exactly(run_module, tmp_path: Path) -> None:
    code, envelope, stderr = run_module(
        "smoke",
        "--local-procs",
        "2",
        "--cpu",
        "--steps",
        "8",
        "--warmup-steps",
        "2",
        "--checkpoint-dir",
        str(tmp_path),
        "--expect-world-size",
        "2",
        timeout=180,
    )
    assert code == 0 and envelope["status"] == "pass", (envelope["findings"], stderr[-2000:])
    details = envelope["details"]
    assert details["world_size"] == 2 and [r["rank"] for r in details["ranks"]] == [0, 1]
    for rank in details["ranks"]:
        assert rank["loss_finite"]
        assert rank["loss_last_window"] < rank["loss_first_window"]
        ck = rank["checkpoint"]
        assert ck["visible"] and ck["exact"] and ck["restore_differences"] == [] and ck["tensors"] > 10
        assert ck["sha256"] == details["ranks"][0]["checkpoint"]["sha256"]
    assert str(tmp_path) in details["ranks"][1]["checkpoint"]["path"]
    assert list(tmp_path.iterdir()) == []  # rank 0 cleaned up after everyone compared
    node = next(m for m in envelope["measurements"] if m["figure"] == "smoke_tflops_per_node")
    assert node["value"] > 0 and node["samples"] == 6


def test_wrong_world_size_fails(run_module) -> None:
    code, envelope, _ = run_module(
        "smoke",
        "--local-procs",
        "1",
        "--cpu",
        "--steps",
        "4",
        "--warmup-steps",
        "1",
        "--expect-world-size",
        "2",
        "--d-model",
        "32",
        "--layers",
        "1",
    )
    assert code == 1 and envelope["status"] == "fail"
    assert any("world size 1, expected 2" in f["message"] for f in envelope["findings"])


def test_a_rank_that_raises_becomes_an_error_envelope(run_module) -> None:
    code, envelope, _ = run_module("smoke", "--local-procs", "1", "--cpu", "--steps", "2", "--warmup-steps", "5")
    assert code == 2 and envelope["status"] == "error"
    assert "rank 0 raised ValueError" in envelope["findings"][0]["message"]
    assert "Traceback" in envelope["details"]["traceback"]
