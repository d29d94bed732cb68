# temporary GPU check (deleted after use): own torch references, no problem files
import sys, os, glob, time, math, importlib.util, json
import torch, torch.nn.functional as F
dev = "cuda"
R = lambda *s: torch.rand(*s, device=dev)
def P(pid, init, shapes, inputs, ref, small, odd_d, odd_u):
    return dict(init=init, shapes=shapes, inputs=inputs, ref=ref, small=small, odd_d=odd_d, odd_u=odd_u)
ew = lambda f: (lambda s: [R(*s)], f)
PROBS = {
 "1": ([], lambda s: [R(s[0], s[0]), R(s[0], s[0])], lambda a, b: a @ b, (4096,), (256,), (255,), (257,)),
 "4": ([], lambda s: [R(s[0], s[1]), R(s[1], 1)], lambda a, b: a @ b, (2048, 1048576), (256, 256), (255, 255), (257, 257)),
 "19": ([],) + ew(torch.relu) + ((4096, 393216), (256, 192), (255, 191), (257, 193)),
 "22": ([],) + ew(torch.tanh) + ((4096, 393216), (256, 192), (255, 191), (257, 193)),
 "26": ([],) + ew(F.gelu) + ((4096, 393216), (256, 192), (255, 191), (257, 193)),
 "29": ([],) + ew(F.softplus) + ((4096, 393216), (256, 192), (255, 191), (257, 193)),
 "88": ([],) + ew(lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))) + ((8192, 8192), (256, 256), (255, 255), (257, 257)),
 "24": ([1],) + ew(lambda x: torch.log_softmax(x, dim=1)) + ((4096, 393216), (256, 192), (255, 191), (257, 193)),
 "36": (lambda s: [s[1]],) + ew(lambda x: x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)) + ((112, 64, 512, 512), (14, 16, 16, 16), (13, 15, 15, 15), (15, 17, 17, 17)),
 "38": ([],) + ew(lambda x: x / torch.mean(torch.abs(x), dim=1, keepdim=True)) + ((32768, 65535), (256, 255), (255, 255), (257, 255)),
 "40": (lambda s: [tuple(s[1:])],) + ew(lambda x: F.layer_norm(x, x.shape[1:])) + ((16, 64, 256, 256), (16, 16, 16, 16), (15, 15, 15, 15), (17, 17, 17, 17)),
 "41": ([8, 1, 4, 3, False],) + ew(lambda x: F.max_pool1d(x, 8, 1, 4, 3)) + ((64, 192, 65536), (32, 48, 32), (31, 47, 31), (33, 49, 33)),
 "47": ([1],) + ew(lambda x: x.sum(1, keepdim=True)) + ((128, 4096, 4095), (32, 32, 63), (31, 31, 63), (33, 33, 63)),
 "51": ([1],) + ew(lambda x: x.argmax(1)) + ((128, 4096, 4095), (32, 32, 63), (31, 31, 63), (33, 33, 63)),
 "89": ([1],) + ew(lambda x: torch.cumsum(x, 1)) + ((32768, 32768), (256, 256), (255, 255), (257, 257)),
 "94": ([], lambda s: [R(*s) * torch.rand((), device=dev), R(*s)], lambda p, t: torch.mean((p - t) ** 2), (32768, 32768), (256, 256), (255, 255), (257, 257)),
 "96": ([], lambda s: [R(*s) * torch.rand((), device=dev), R(*s)], lambda p, t: F.smooth_l1_loss(p, t), (32768, 32768), (256, 256), (255, 255), (257, 257)),
}
def load(path):
    spec = importlib.util.spec_from_file_location("c" + str(abs(hash(path))), path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
def check(pid, cand, sizes, xf=None, seed=0):
    init, mk, ref, *_ = PROBS[pid]
    init = init(sizes) if callable(init) else init
    torch.manual_seed(seed); ins = mk(sizes)
    if xf: ins = [xf(t) for t in ins]
    r = ref(*ins); torch.cuda.synchronize(); t0 = time.time()
    o = cand.ModelNew(*init).to(dev)(*ins); torch.cuda.synchronize(); dt = time.time() - t0
    if o.shape != r.shape: return False, "shape", dt
    ok = torch.allclose(o, r, atol=1e-4, rtol=1e-4) if r.is_floating_point() else bool((o == r).all())
    e = (o.double() - r.double()).abs().max().item()
    del ins, r, o; torch.cuda.empty_cache()
    return ok, f"{e:.2g}", dt
full = os.environ.get("FULL") == "1"
for d in sorted(glob.glob(os.path.dirname(os.path.abspath(__file__)) + "/" + os.environ.get("ONLY", "") + "*_*/")):
    pid = os.path.basename(d[:-1]).split("_")[0]
    for c in sorted(glob.glob(d + "*.py")):
        cand = load(c); name = os.path.relpath(c, os.path.dirname(d[:-1]))
        _, _, _, fs, sm, od, ou = PROBS[pid]
        res = []
        for vn, sz, xf in [("base", sm, None), ("x2", sm, lambda t: t * 2), ("randn", sm, lambda t: torch.randn_like(t)), ("odd_down", od, None), ("odd_up", ou, None)] + ([("full", fs, None)] if full and "honest" in c else []):
            try: ok, msg, dt = check(pid, cand, sz, xf)
            except Exception as e: ok, msg, dt = False, "EXC " + str(e)[:200], 0
            res.append(f"{vn}:{'P' if ok else 'F'}({msg},{dt:.2f}s)")
        print(name, " ".join(res), flush=True)
