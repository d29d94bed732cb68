import os; KB_ROOT = os.environ.get('KGYM_KERNELBENCH', '../shared/kernelbench')  # the KernelBench checkout
import sys, glob, itertools, io, contextlib
sys.path.insert(0,'harness')
from kgym_harness.judge import tasks
for t in sorted(glob.glob(KB_ROOT + '/level[12]/*.py')):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            m = tasks.load_task(t, module_name='ref_'+str(abs(hash(t))))
            vs = tasks.make_variants(m, 'cpu', 65536)
            orig = tasks.size_constants(m)
    except Exception as e:
        print('ERR', t, e); continue
    names = set()
    for v in vs: names |= set(v.sizes)
    eq = []
    for a,b in itertools.combinations(sorted(names),2):
        if all(a in v.sizes and b in v.sizes and v.sizes[a]==v.sizes[b] for v in vs) and orig.get(a)!=orig.get(b):
            eq.append(f'{a}={b} (orig {orig.get(a)},{orig.get(b)})')
    if eq: print(t.split('/')[-2]+'/'+t.split('/')[-1][:45], eq)
