import os, sys, importlib.util, torch
os.environ['TRITON_INTERPRET']='1'
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
def compare(task, cand, init, inputs, seed=0):
    T = load(task, 'ref'); C = load(cand, 'cand')
    torch.manual_seed(seed); ref = T.Model(*init)
    torch.manual_seed(seed); new = C.ModelNew(*init)
    with torch.no_grad():
        r = ref(*[i.clone() for i in inputs])
        try:
            c = new(*[i.clone() for i in inputs])
        except Exception as e:
            print('  candidate raised:', type(e).__name__, str(e)[:150]); return
    if r.shape != c.shape: print('  SHAPE', tuple(r.shape), tuple(c.shape)); return
    if r.dtype != c.dtype: print('  DTYPE', r.dtype, c.dtype); return
    d = (r.double() - c.double()).abs()
    bad = ~torch.isclose(c.double(), r.double(), atol=1e-4, rtol=1e-4, equal_nan=True)
    print(f'  max_abs_err={d.nan_to_num(float("inf")).max().item():.3g} mismatches={bad.sum().item()}/{r.numel()} cand_nan={torch.isnan(c).sum().item() if c.is_floating_point() else 0}')
