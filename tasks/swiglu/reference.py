import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    # The output of a fused gate/up projection: [gate | up] side by side in each row.
    x = 2 * torch.randn(shape["rows"], 2 * shape["hidden"], generator=g, device=device)
    return (x.to(getattr(torch, shape["dtype"])),)


def reference(x: torch.Tensor) -> torch.Tensor:
    hidden = x.shape[-1] // 2
    gate, up = x[:, :hidden].float(), x[:, hidden:].float()
    return (torch.nn.functional.silu(gate) * up).to(x.dtype)


def flops(shape: dict) -> int:
    return 5 * shape["rows"] * shape["hidden"]  # negate, exp, add, divide, multiply


def bytes_moved(shape: dict) -> int:
    size = torch.finfo(getattr(torch, shape["dtype"])).bits // 8
    return 3 * shape["rows"] * shape["hidden"] * size  # read gate and up, write out
