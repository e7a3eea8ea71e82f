import torch
import torch.nn.functional as F


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    rows, vocab = shape["rows"], shape["vocab"]
    # Language-model logits: spread of a few units, so the softmax is peaked but not one-hot.
    logits = 3 * torch.randn(rows, vocab, generator=g, device=device)
    # Each row shifted by up to 150 either way (the loss does not change): a logsumexp without the row max
    # subtracted overflows or underflows on most rows (red team round 119 passed such a kernel)
    logits += 300 * torch.rand(rows, 1, generator=g, device=device) - 150
    target = torch.randint(0, vocab, (rows,), generator=g, device=device, dtype=torch.int64)
    return logits.to(getattr(torch, shape["dtype"])), target


def reference(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # Eager: a float32 copy of the logits (bfloat16 only), log_softmax over the whole
    # (rows, vocab) matrix written to memory, then a gather of one element per row.
    return F.cross_entropy(logits.float(), target, reduction="none")


def flops(shape: dict) -> int:
    return 4 * shape["rows"] * shape["vocab"]  # max, subtract, exp, add per logit


def bytes_moved(shape: dict) -> int:
    rows, vocab = shape["rows"], shape["vocab"]
    elem = torch.finfo(getattr(torch, shape["dtype"])).bits // 8
    return rows * vocab * elem + rows * 8 + rows * 4  # logits, int64 targets, float32 losses
