import torch


def make_inputs(shape: dict, seed: int, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=device).manual_seed(seed)
    rows, cols, dtype = shape["rows"], shape["cols"], getattr(torch, shape["dtype"])
    # x: columns 1..cols of a (rows, cols + 3) buffer, so its row stride is cols + 3 and its rows
    # start one element past wherever the buffer's rows start.
    wide = torch.randn(rows, cols + 3, generator=g, device=device, dtype=dtype)
    x = wide[:, 1 : cols + 1]
    # y: the transpose of a contiguous (cols, rows) tensor, so it is column-major.
    y = torch.randn(cols, rows, generator=g, device=device, dtype=dtype).t()
    return x, y


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def flops(shape: dict) -> int:
    return shape["rows"] * shape["cols"]


def bytes_moved(shape: dict) -> int:
    return 3 * shape["rows"] * shape["cols"] * torch.finfo(getattr(torch, shape["dtype"])).bits // 8
