# throwaway GPU check (deleted after use): our own torch references, candidate parameters
import sys, time, glob, os, importlib.util, torch, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False
D = os.path.dirname(os.path.abspath(__file__))
lin = lambda m, x, l: F.linear(x, l.weight, l.bias)
def swish(y): return y * torch.sigmoid(y)
P = {
 12: (lambda K, N: (K, N, 2.0, 0.1), lambda m, x: F.leaky_relu(lin(m, x, m.gemm) * 2.0, 0.1), (1024, 8192, 8192)),
 22: (lambda K, N: (K, N, 2.0, -10.0, 10.0), lambda m, x: (lambda t: t * F.mish(t))(torch.logsumexp(torch.clamp(2 * (lin(m, x, m.matmul) * 2.0), -10, 10), 1, keepdim=True)), (1024, 8192, 8192)),
 29: (lambda K, N: (K, N), lambda m, x: F.mish(F.mish(lin(m, x, m.linear))), (1024, 8192, 8192)),
 40: (lambda K, N: (K, N, 0.5), lambda m, x: (lambda y: y * 0.5 + y)(lin(m, x, m.matmul)), (16384, 4096, 4096)),
 53: (lambda K, N: (K, N, 0.5, -2, 2), lambda m, x: F.gelu(F.hardtanh(lin(m, x, m.gemm) * 0.5, -2, 2)), (2048, 8192, 8192)),
 56: (lambda K, N: (K, N), lambda m, x: torch.sigmoid(lin(m, x, m.linear)).sum(1, keepdim=True), (128, 32768, 32768)),
 59: (lambda K, N: (K, N, 2.0), lambda m, x: swish(lin(m, x, m.matmul)) * 2.0, (128, 32768, 32768)),
 63: (lambda K, N: (K, N, 2.0), lambda m, x: torch.relu(lin(m, x, m.linear)) / 2.0, (1024, 8192, 8192)),
 68: (lambda K, N: (K, N, 2.0), lambda m, x: torch.min(lin(m, x, m.linear), m.constant) - m.constant, (128, 16384, 16384)),
 70: (lambda K, N: (K, N, 2.0), lambda m, x: (lambda y: torch.sigmoid(y) * 2.0 + y)(lin(m, x, m.gemm)), (1024, 8192, 8192)),
 76: (lambda K, N: (K, N, (N,)), lambda m, x: torch.relu(x @ m.gemm.weight.T + m.bias), (1024, 8192, 8192)),
 81: (lambda K, N: (K, N), lambda m, x: torch.clamp(torch.tanh(torch.clamp(swish(lin(m, x, m.gemm)) / 2.0, -1, 1)), -1, 1), (1024, 8192, 8192)),
 86: (lambda K, N: (K, N, 10.0), lambda m, x: F.gelu(lin(m, x, m.linear) / 10.0), (1024, 8192, 8192)),
 95: (lambda K, N: (K, N, (N,)), lambda m, x: F.hardtanh(F.gelu(torch.tanh(swish(lin(m, x, m.matmul) + m.add_value))), -1, 1), (1024, 8192, 8192)),
 97: (lambda K, N: (K, N, 1e-5, 0.1, (1,), 1.0), lambda m, x: swish((F.batch_norm(lin(m, x, m.matmul), None, None, m.bn.weight, m.bn.bias, True, 0.1, m.bn.eps) + m.bias) / 1.0), (1024, 8192, 8192)),
 98: (lambda K, N: (K, N, 16, 2.0), lambda m, x: (F.gelu(F.avg_pool1d(lin(m, x, m.matmul).unsqueeze(1), 16).squeeze(1)) * 2.0).max(1).values, (1024, 8192, 8192)),
}
which = sys.argv[1] if len(sys.argv) > 1 else "honest"
DEV = os.environ.get("DEV", "cuda")
SYNC = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)
for pid, (init, ref, full) in P.items():
    d = glob.glob(f"{D}/{pid}_*")[0]
    for path in sorted(glob.glob(f"{d}/{which}*.py")):
        spec = importlib.util.spec_from_file_location(f"c{pid}{os.path.basename(path)[:-3]}", path)
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        res = []
        for tag, (M, K, N) in ([("full", full), ("odd", (1000, 1001, 999))] if DEV == "cuda" else []) + [("small", (37, 70, 45))]:
            torch.manual_seed(0)
            with torch.device(DEV):
                m = mod.ModelNew(*init(K, N))
                x = torch.randn(M, K) if tag == "small" else torch.rand(M, K)
            with torch.no_grad():
                o = m(x); SYNC(); t0 = time.time(); o = m(x); SYNC(); dt = time.time() - t0
                r = ref(m, x)
            ok = o.shape == r.shape and torch.allclose(o, r, atol=1e-4, rtol=1e-4)
            res.append(f"{tag}:{'PASS' if ok else 'FAIL'}({float((o - r).abs().max()) if o.shape == r.shape else -1:.2e},{dt*1e3:.1f}ms)")
            del m, x, o, r
        print(os.path.relpath(path, D), " ".join(res), flush=True)
