"""Direct calls on CUDA: do repeated calls give bitwise different results?"""
import torch
torch.manual_seed(0)
dev = "cuda"
def distinct(fn, n=50):
    outs = set()
    for _ in range(n):
        outs.add(fn().float().cpu().numpy().tobytes())
    return len(outs)
for dtype in (torch.float16, torch.bfloat16, torch.float32):
    for dims, shape, out in ((2, (4, 8, 37, 37), (5, 5)), (2, (4, 8, 40, 40), (5, 5)), (3, (2, 4, 13, 13, 13), (3, 3, 3)), (3, (2, 4, 12, 12, 12), (3, 3, 3))):
        for fmt in ("contiguous", "channels_last"):
            x = torch.randn(shape, device=dev, dtype=dtype)
            if fmt == "channels_last":
                x = x.to(memory_format=torch.channels_last if dims == 2 else torch.channels_last_3d)
            g = (torch.randn((shape[0], shape[1]) + out, device=dev) * torch.logspace(-3, 3, out[-1], device=dev)).to(dtype)
            pool = torch.nn.functional.adaptive_avg_pool2d if dims == 2 else torch.nn.functional.adaptive_avg_pool3d
            def grad():
                xx = x.detach().requires_grad_()
                pool(xx, out).backward(g)
                return xx.grad
            print(f"adaptive_avg_pool{dims}d {tuple(shape)}->{out} {dtype} {fmt}: {distinct(grad)} distinct gradients in 50 calls", flush=True)
# scatter_reduce amax over tied signed zeros: the output's zero signs
n, segs = 4096, 16
for dtype in (torch.float32, torch.float64):
    src = torch.zeros(n, device=dev, dtype=dtype)
    src[::2] = -0.0
    idx = torch.arange(n, device=dev) // (n // segs)
    def fwd():
        return torch.zeros(segs, device=dev, dtype=dtype).scatter_reduce(0, idx, src, "amax", include_self=False)
    signs = set()
    for _ in range(50):
        signs.add(tuple(torch.signbit(fwd()).tolist()))
    print(f"scatter_reduce amax {dtype} {n} tied +-0 over {segs} segments: {len(signs)} distinct sign patterns in 50 calls", flush=True)
