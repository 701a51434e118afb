"""Why the smoke test's loss jumps at step 15 on H200: the smoke's training loop on one GPU,
instrumented, under a few optimizer settings.

    python3 bench/gpu/smoke_spike.py --variants baseline,clip1,lr15,beta99,eps6 > spike.json

It reproduces validation.smoke's run exactly as far as the arithmetic goes: the same
preset (gpt-944m), seed, synthetic batch pool per rank, warm-up, AdamW settings and
bf16 autocast. DDP over R ranks averages the R ranks' gradients; here each step runs
the R ranks' micro-batches one after another on one GPU and averages their gradients
the same way (--ranks, default 2, as in the 2 x H200 runs), so one GPU shows what two
showed. Per step it records the loss (rank 0's micro-batch, as the smoke reports it),
the global gradient norm, the gradient norm and the update norm of each part of the
model (embeddings, each block, final norm, head) and the largest Adam step ratio
|m_hat| / (sqrt(v_hat) + eps) of each part.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from validation.gpt import GPT, PRESETS, Attention  # noqa: E402

ORIGINAL_ATTENTION = Attention.forward

VARIANTS = {
    # validation.gpt as it is now: an eighth of the ids, the loss over them (torch.compile on);
    # until 2026-12-01 the loss was over every id: that is "eager" and the variants below it
    "baseline": {"sliced_by_model": True},
    # the same without torch.compile; the ablations below run eager too (they start faster)
    "eager": {"compile": False},
    "clip1": {"compile": False, "clip": 1.0},
    "lr15": {"compile": False, "lr": 1.5e-4},
    "beta99": {"compile": False, "beta2": 0.99},
    "eps6": {"compile": False, "eps": 1e-6},
    "warm30": {"compile": False, "lr_warmup": 30},
    # every token id occurs (the successor rule modulo the whole vocabulary)
    "fullvocab": {"compile": False, "active": 0},
    "fullvocab_c": {"active": 0},
    # the data on a few ids, the loss over those ids alone (the head still computes every logit)
    "slice256": {"compile": False, "active": 256, "slice": True},
    "slice4096": {"compile": False, "active": 4096, "slice": True},
    "slice256_c": {"active": 256, "slice": True},
    # stabilisers, each alone on the data as it was
    "qknorm": {"compile": False, "qknorm": True},
    "qknorm256": {"compile": False, "qknorm": True, "active": 256, "slice": True},
    "zloss": {"compile": False, "zloss": 1e-4},
    "lr1": {"compile": False, "lr": 1e-4},
    "headlr": {"compile": False, "head_lr": 0.1},
}


def qk_normed_forward(self, x):
    """validation.gpt.Attention.forward with q and k RMS-normalised per head (QK-norm)."""
    import torch.nn.functional as F

    batch, seq, width = x.shape
    q, k, v = self.qkv(x).split(width, dim=2)
    shape = (batch, seq, self.n_head, width // self.n_head)
    q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
    q, k = F.rms_norm(q, (q.shape[-1],)), F.rms_norm(k, (k.shape[-1],))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.proj(y.transpose(1, 2).contiguous().view(batch, seq, width))


def sliced_loss(model, x, y, classes):
    """The model's loss with the cross-entropy over the first `classes` logits only."""
    import torch.nn.functional as F

    positions = torch.arange(x.shape[1], device=x.device)
    h = model.tok_emb(x) + model.pos_emb(positions)
    for block in model.blocks:
        h = block(h)
    logits = model.head(model.ln_f(h))
    return F.cross_entropy(logits[..., :classes].float().reshape(-1, classes), y.reshape(-1))


def batch(cfg, gen, device, active):
    """validation.gpt.synthetic_batch's rule, with the share of the vocabulary that occurs as a parameter
    (the smoke now uses all of it; these runs reproduce the eighth it used before)."""
    shape = (cfg.micro_batch, cfg.seq_len + 1)
    start = torch.randint(0, active, (cfg.micro_batch, 1), generator=gen, device=device)
    steps = torch.randint(1, 5, shape, generator=gen, device=device)
    steps[:, 0] = 0
    tokens = (start + steps.cumsum(dim=1)) % active
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


@torch.no_grad()
def inactive_mass(model, x, active):
    """Mean probability the model gives to token ids that never occur (>= active)."""
    positions = torch.arange(x.shape[1], device=x.device)
    h = model.tok_emb(x) + model.pos_emb(positions)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        for block in model.blocks:
            h = block(h)
        logits = model.head(model.ln_f(h)).float()
    probs = logits.softmax(-1)
    return float(probs[..., active:].sum(-1).mean()), float(logits[..., active:].mean() - logits[..., :active].mean())


def z_term(model, x):
    """PaLM's z-loss term: the mean squared log-normaliser of the logits."""
    positions = torch.arange(x.shape[1], device=x.device)
    h = model.tok_emb(x) + model.pos_emb(positions)
    for block in model.blocks:
        h = block(h)
    return torch.logsumexp(model.head(model.ln_f(h)).float(), dim=-1).pow(2).mean()


def part_of(name: str) -> str:
    if name.startswith("blocks."):
        return "block" + name.split(".")[1]
    return name.split(".")[0]


def run(variant: str, opts: dict, args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    cfg = PRESETS[args.preset]
    if not opts.get("sliced_by_model"):
        cfg = replace(cfg, data_vocab=0)  # the loss over every id, as validation.gpt had it until 2026-12-01
    lr = opts.get("lr", cfg.lr)
    from validation import gpt as gpt_module

    gpt_module.Attention.forward = qk_normed_forward if opts.get("qknorm") else ORIGINAL_ATTENTION
    with device:
        model = GPT(cfg)
    names = {p: n for n, p in model.named_parameters()}
    head_mult = opts.get("head_lr", 1.0)
    outer = [p for n, p in model.named_parameters() if n.startswith(("head", "tok_emb"))]
    inner = [p for n, p in model.named_parameters() if not n.startswith(("head", "tok_emb"))]
    optimizer = torch.optim.AdamW(
        [{"params": inner, "mult": 1.0}, {"params": outer, "mult": head_mult}],
        lr=lr,
        betas=(0.9, opts.get("beta2", 0.95)),
        eps=opts.get("eps", 1e-8),
        weight_decay=0.1,
        fused=args.device == "cuda",
    )
    if opts.get("slice"):
        classes = opts["active"]

        def forward(x, y):
            return sliced_loss(model, x, y, classes)

        net = torch.compile(forward) if opts.get("compile", True) else forward
    else:
        net = torch.compile(model) if opts.get("compile", True) else model
    # The data as the smoke had it until 2026-12-01 (an eighth of the vocabulary), unless the variant says otherwise.
    active = opts.get("active", max(8, cfg.vocab_size // 8)) or cfg.vocab_size
    pools = []
    for rank in range(args.ranks):
        gen = torch.Generator(device=device).manual_seed(args.seed * 1000 + rank)
        pools.append([batch(cfg, gen, device, active) for _ in range(8)])
    warmup = opts.get("lr_warmup", 10)
    clip = opts.get("clip", math.inf)
    steps = []
    t0 = time.perf_counter()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * group["mult"] * min(1.0, (step + 1) / warmup)
        mass = inactive_mass(model, pools[0][step % 8][0], active) if args.probe and active < cfg.vocab_size else None
        losses = []
        for rank in range(args.ranks):
            x, y = pools[rank][step % 8]
            with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.device == "cuda"):
                loss = net(x, y)
            total_loss = loss
            if opts.get("zloss"):
                total_loss = loss + opts["zloss"] * z_term(model, x)
            (total_loss / args.ranks).backward()
            losses.append(loss.detach())
        total = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        grad_parts: dict[str, float] = {}
        for p in model.parameters():
            key = part_of(names[p])
            grad_parts[key] = grad_parts.get(key, 0.0) + float(p.grad.float().pow(2).sum())
        before = {names[p]: p.detach().clone() for p in model.parameters()}
        optimizer.step()
        update_parts: dict[str, float] = {}
        ratio_parts: dict[str, float] = {}
        beta1, beta2 = optimizer.param_groups[0]["betas"]
        eps = optimizer.param_groups[0]["eps"]
        for p in model.parameters():
            key = part_of(names[p])
            update_parts[key] = update_parts.get(key, 0.0) + float((p.detach() - before[names[p]]).float().pow(2).sum())
            state = optimizer.state[p]
            t = float(state["step"])
            m_hat = state["exp_avg"] / (1 - beta1**t)
            v_hat = state["exp_avg_sq"] / (1 - beta2**t)
            ratio = float((m_hat.abs() / (v_hat.sqrt() + eps)).max())
            ratio_parts[key] = max(ratio_parts.get(key, 0.0), ratio)
        optimizer.zero_grad(set_to_none=True)
        del before
        steps.append(
            {
                "step": step,
                "loss": [float(v) for v in losses],
                "inactive_mass_and_logit_gap": mass,
                "grad_norm": float(total),
                "grad_norm_parts": {k: math.sqrt(v) for k, v in grad_parts.items()},
                "update_norm_parts": {k: math.sqrt(v) for k, v in update_parts.items()},
                "adam_ratio_max_parts": ratio_parts,
            }
        )
        print(
            f"{variant} step {step:2d} loss {float(losses[0]):7.3f} grad {float(total):9.3f} inactive {mass}",
            file=sys.stderr,
            flush=True,
        )
    return {"variant": variant, "options": opts, "wall_s": time.perf_counter() - t0, "steps": steps}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", default="baseline,clip1,lr15")
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--probe", action="store_true", help="also the probability given to never-seen token ids")
    p.add_argument("--preset", default="gpt-944m", choices=sorted(PRESETS))
    p.add_argument("--device", default="cuda", help="cuda, or cpu with --preset tiny to try the script")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    out = [run(v, VARIANTS[v], args) for v in args.variants.split(",")]
    json.dump(
        {
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
            "runs": out,
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
