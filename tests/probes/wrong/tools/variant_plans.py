import sys
sys.path.insert(0,'harness')
from kgym_harness.judge import tasks
for t in sys.argv[1:]:
    m = tasks.load_task(t)
    vs = tasks.make_variants(m, 'cpu', 65536)
    print('==', t.split('/')[-1])
    for v in vs:
        d = {k:getattr(v,k) for k in ('name','sizes','transform') if hasattr(v,k)}
        print('  ', v.name, getattr(v,'transform',None), getattr(v,'sizes',None) or getattr(v,'values',None))
