import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    # A spread of 4 gives rows dominated by a few entries (outputs near 0) and long tails (near -40).
    x = 4 * torch.randn(shape["rows"], shape["cols"], generator=g, device=device)
    # Each row shifted by up to 150 either way (log_softmax does not change): without the row max subtracted,
    # exp overflows or underflows on most rows (red team round 119)
    x += 300 * torch.rand(shape["rows"], 1, generator=g, device=device) - 150
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    if x.device.type == "cpu" and x.dtype != torch.float32:
        # PyTorch's CPU kernel rounds the bf16 row sum to bf16 before its log (errors up to ~4e-3
        # next to the row max); its CUDA kernel, like the task, accumulates in float32. CPU mode
        # computes in float32 so that it checks the same numbers as the GPU does.
        return torch.log_softmax(x.float(), dim=-1).to(x.dtype)
    return torch.log_softmax(x, dim=-1)


def flops(shape: dict) -> int:
    return 5 * shape["rows"] * shape["cols"]  # max, subtract, exp, sum, subtract


def bytes_moved(shape: dict) -> int:
    return 2 * shape["rows"] * shape["cols"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
