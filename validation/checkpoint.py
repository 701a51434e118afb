"""The training smoke test's checkpoint round trip: rank 0 writes the model and the optimizer,
every rank reads them back into a fresh copy, and each copy is compared bit for bit with rank 0's
save and with the rank's own replica (validation.smoke runs it after training)."""

from __future__ import annotations

import hashlib
import io
import math
import os
import time
from pathlib import Path
from typing import Any

from validation.result import Report

# How far a replica may sit from rank 0's and still count as the same model: rounding-level.
# DDP replicas see identical all-reduced gradients, yet a CPU/gloo run of this script showed
# one in about sixty runs with a few embedding elements apart by a few ulp (docs/validation.md);
# a replica that missed an update or a broken all-reduce is apart by orders of magnitude more.
REPLICA_RTOL = 1e-5


def _differences(mine: dict[str, Any], theirs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Tensors (and other entries) that differ in any bit: name, elements that differ, and the
    largest difference relative to the tensor's largest magnitude (inf for a different key,
    dtype, shape or non-tensor value)."""
    import torch

    bad: list[dict[str, Any]] = []
    for key in sorted(set(mine) | set(theirs), key=str):
        a, b = mine.get(key), theirs.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            bad += _differences(a, b, name + ".")
        elif isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            a, b = a.detach().cpu(), b.detach().cpu()
            if a.dtype != b.dtype or a.shape != b.shape:
                bad.append({"name": name, "elements": None, "relative": math.inf})
            elif not torch.equal(a, b):
                diff = (a.double() - b.double()).abs()
                scale = float(b.double().abs().max()) or 1.0
                bad.append(
                    {
                        "name": name,
                        "elements": int((diff > 0).sum()),
                        "of": a.numel(),
                        "relative": float(diff.max()) / scale,
                    }
                )
        elif isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) or a != b:
            bad.append({"name": name, "elements": None, "relative": math.inf})
    return bad


def _state_differences(model: Any, optimizer: Any, state: dict[str, Any]) -> list[dict[str, Any]]:
    """What differs between a model and its optimizer and a loaded checkpoint of both."""
    return _differences(model.state_dict(), state["model"], "model.") + _differences(
        {str(k): v for k, v in optimizer.state_dict()["state"].items()},
        {str(k): v for k, v in state["optimizer"]["state"].items()},
        "optimizer.",
    )


def describe(differences: list[dict[str, Any]], limit: int = 3) -> str:
    """'model.tok_emb.weight (3 of 32768 elements, 2.1e-07 relative)', the first few."""
    parts = []
    for d in differences[:limit]:
        if d["elements"] is None:
            parts.append(f"{d['name']} (a different dtype, shape or value)")
        else:
            parts.append(f"{d['name']} ({d['elements']} of {d['of']} elements, {d['relative']:.2g} relative)")
    more = len(differences) - limit
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def checkpoint_round_trip(
    model: Any,
    optimizer: Any,
    make_model: Any,
    make_optimizer: Any,
    path: Path,
    is_writer: bool,
    barrier: Any,
    device: Any,
) -> dict[str, Any]:
    """The writer saves model and optimizer; after the barrier every rank reads the file's bytes
    (their SHA-256 says whether storage served what was written), restores them into fresh
    objects (which must hold exactly what was saved) and compares its own replica with them
    (rank 0's replica: the replicas must agree)."""
    import torch

    result: dict[str, Any] = {"path": str(path)}
    if is_writer:
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        result["write_s"] = time.perf_counter() - t0
        result["bytes"] = path.stat().st_size
    barrier()
    try:
        t0 = time.perf_counter()
        data = path.read_bytes()
        result["read_s"] = time.perf_counter() - t0
    except OSError as exc:
        result.update(visible=False, exact=False, error=f"{type(exc).__name__}: {exc}")
        return result
    result.update(visible=True, sha256=hashlib.sha256(data).hexdigest(), read_bytes=len(data))
    loaded = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    fresh = make_model()
    fresh.load_state_dict(loaded["model"], strict=True)
    fresh_optimizer = make_optimizer(fresh)
    fresh_optimizer.load_state_dict(loaded["optimizer"])
    restored = _state_differences(fresh, fresh_optimizer, loaded)
    replica = _state_differences(model, optimizer, loaded)
    result.update(
        exact=not restored,
        restore_differences=restored[:20],
        replica_differences=replica[:20],
        replica_max_relative=max((d["relative"] for d in replica), default=0.0),
        tensors=len(fresh.state_dict()) + sum(len(s) for s in fresh_optimizer.state.values()),
    )
    return result


def checkpoint_findings(report: Report, everyone: list[dict[str, Any]], label_of: Any) -> None:
    """Judge every rank's round trip against rank 0's (the writer's)."""
    writer = everyone[0]["checkpoint"]
    for r in everyone:
        ck, label = r["checkpoint"], label_of(r)
        if not ck.get("visible"):
            report.error(
                f"cannot read the checkpoint rank 0 wrote ({ck.get('error')}): is --checkpoint-dir on shared storage?",
                label,
            )
            continue
        if writer.get("sha256") and ck.get("sha256") != writer.get("sha256"):
            report.error(
                f"the checkpoint read back ({ck.get('read_bytes')} bytes) is not the file rank 0 wrote "
                f"({writer.get('bytes')} bytes): the shared storage served other content",
                label,
            )
            continue
        if not ck.get("exact"):
            report.error(f"checkpoint restore is not bit-exact: {describe(ck.get('restore_differences', []))}", label)
        differences = ck.get("replica_differences", [])
        if not differences:
            continue
        if r is everyone[0]:
            report.error(f"the checkpoint does not hold what rank 0 saved: {describe(differences)}", label)
        elif ck.get("replica_max_relative", math.inf) > REPLICA_RTOL:
            report.error(f"this rank's model replica diverged from rank 0's: {describe(differences)}", label)
        else:
            report.warning(
                f"this rank's replica differs from rank 0's at rounding level: {describe(differences)}", label
            )
