"""A small GPT for the training smoke test: pre-norm transformer, SDPA attention.

Written here so the smoke test depends on nothing but torch. The shapes of
the "gpt-944m" preset (d 2048, 16 layers, 16 heads, vocab 32768, seq 2048,
untied head, learned positions) give 943.8 M parameters.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    seq_len: int
    n_layer: int
    n_head: int
    d_model: int
    micro_batch: int
    lr: float
    # Token ids the synthetic data uses, and the classes the loss is taken over (the head still
    # computes all vocab_size logits, so the FLOPs are the whole model's); 0: the whole vocabulary.
    data_vocab: int = 0

    @property
    def classes(self) -> int:
        return min(self.data_vocab, self.vocab_size) if self.data_vocab else self.vocab_size

    def to_dict(self) -> dict:
        return asdict(self)

    def with_overrides(self, **overrides: int | float | None) -> GPTConfig:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


PRESETS = {
    "gpt-944m": GPTConfig(
        vocab_size=32768, seq_len=2048, n_layer=16, n_head=16, d_model=2048, micro_batch=8, lr=3e-4, data_vocab=4096
    ),
    "gpt-125m": GPTConfig(
        vocab_size=32768, seq_len=1024, n_layer=12, n_head=12, d_model=768, micro_batch=16, lr=6e-4, data_vocab=4096
    ),
    "tiny": GPTConfig(vocab_size=512, seq_len=64, n_layer=2, n_head=2, d_model=64, micro_batch=8, lr=3e-3),
}


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        if cfg.d_model % cfg.n_head:
            raise ValueError(f"d_model {cfg.d_model} is not a multiple of n_head {cfg.n_head}")
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        shape = (batch, seq, self.n_head, width // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        # SDPA picks the flash kernel on Hopper for bf16 causal attention.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(batch, seq, width))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.d_model, bias=False)
        self.attn = Attention(cfg)
        self.ln_mlp = nn.LayerNorm(cfg.d_model, bias=False)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=False)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init)
        # GPT-2's scaling of the residual projections keeps the stream's variance flat with depth.
        for name, param in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        # Over the classes the data uses: ids that never occur would otherwise be pushed down along one
        # shared direction of the last hidden state, which an Adam step can flip (bench/gpu/spike.md).
        classes = self.cfg.classes
        return F.cross_entropy(logits[..., :classes].float().reshape(-1, classes), targets.view(-1))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def flops_per_token(n_params: int, cfg: GPTConfig) -> float:
    """Training FLOPs per token: 6N for the weights plus 12·L·d·seq for attention scores
    (the PaLM / nanoGPT convention, counting the full, not the causal half, attention matrix)."""
    return 6.0 * n_params + 12.0 * cfg.n_layer * cfg.d_model * cfg.seq_len


def synthetic_batch(
    cfg: GPTConfig, generator: torch.Generator, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Learnable synthetic tokens: each next token is the previous plus 1..4, modulo the
    data's share of the vocabulary (cfg.classes), so the loss falls from ln(classes) toward
    ln 4 and a falling loss is a real signal. The loss is taken over those classes only
    (GPT.forward): see bench/gpu/spike.md for why."""
    active = cfg.classes
    shape = (cfg.micro_batch, cfg.seq_len + 1)
    start = torch.randint(0, active, (cfg.micro_batch, 1), generator=generator, device=device)
    steps = torch.randint(1, 5, shape, generator=generator, device=device)
    steps[:, 0] = 0
    tokens = (start + steps.cumsum(dim=1)) % active
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
