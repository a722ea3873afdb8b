"""The synthetic GPT-style decoder `train` steps (docs/commands/train.md).

shape() and parameters() are pure (no torch), so that a bad shape is refused at parse
time on every rank alike, before torch loads.
"""
from dataclasses import asdict, dataclass
from typing import Any, List, Optional, Tuple

from ..errors import UsageError


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int


# GPT-2's four sizes (Radford et al. 2019), and a CPU-sized one of a few million parameters.
PRESETS = {
    "tiny": Shape(layers=2, hidden=256, heads=4, seq=128, vocab=8192),
    "gpt2": Shape(layers=12, hidden=768, heads=12, seq=1024, vocab=50257),
    "gpt2-medium": Shape(layers=24, hidden=1024, heads=16, seq=1024, vocab=50257),
    "gpt2-large": Shape(layers=36, hidden=1280, heads=20, seq=1024, vocab=50257),
    "gpt2-xl": Shape(layers=48, hidden=1600, heads=25, seq=1024, vocab=50257),
}
FIELDS = tuple(Shape.__dataclass_fields__)


def shape(preset: str, **overrides: Optional[int]) -> Shape:
    """The preset's Shape with the given fields (None: keep) replaced; UsageError if bad."""
    if preset not in PRESETS:
        raise UsageError(f"unknown model preset '{preset}' (presets: {', '.join(PRESETS)})")
    values = asdict(PRESETS[preset])
    values.update({k: v for k, v in overrides.items() if v is not None})    # each at least 1: argparse
    if values["hidden"] % values["heads"]:
        raise UsageError(f"--hidden {values['hidden']} is not divisible by --heads "
                         f"{values['heads']} (each head takes hidden/heads channels)")
    return Shape(**values)


def parameters(s: Shape) -> int:
    """Parameter count of the model built from Shape s (the head is tied: no extra)."""
    h = s.hidden
    block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (4 * h * h + 4 * h) + (4 * h * h + h)
    return s.vocab * h + s.seq * h + s.layers * block + 2 * h


def describe(name: str, s: Shape) -> str:
    return (f"{name} ({parameters(s) / 1e6:.1f}M parameters: {s.layers} layers, hidden "
            f"{s.hidden}, {s.heads} heads, seq {s.seq}, vocab {s.vocab})")


def build(s: Shape, device: Any) -> Any:
    """The model on device, its weights the same on every rank (seeded alike)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(s.hidden), nn.LayerNorm(s.hidden)
            self.qkv = nn.Linear(s.hidden, 3 * s.hidden)
            self.proj = nn.Linear(s.hidden, s.hidden)
            self.fc = nn.Linear(s.hidden, 4 * s.hidden)
            self.out = nn.Linear(4 * s.hidden, s.hidden)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = (z.view(b, t, s.heads, c // s.heads).transpose(1, 2)
                       for z in self.qkv(self.ln1(x)).split(c, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(s.vocab, s.hidden)
            self.wpe = nn.Embedding(s.seq, s.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(s.layers))
            self.ln_f = nn.LayerNorm(s.hidden)

        def forward(self, idx: Any, targets: Any) -> Any:
            # No buffers: DDP would broadcast them before every forward, even in no_sync.
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)     # the tied head
            return F.cross_entropy(logits.float().view(-1, s.vocab), targets.reshape(-1))

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT()
        for name, p in model.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
    return model.to(device)


def batches(s: Shape, batch: int, seed: int, count: int, device: Any) -> List[Tuple[Any, Any]]:
    import torch
    g = torch.Generator().manual_seed(seed)
    tokens = [torch.randint(s.vocab, (batch, s.seq + 1), generator=g).to(device) for _ in range(count)]
    return [(t[:, :-1], t[:, 1:]) for t in tokens]
