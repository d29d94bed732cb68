import sys; sys.path.insert(0,'tests/probes/wrong/tools'); from verify_lib import *
C=load('tests/probes/wrong/w16_l1_28_hardsigmoid_workspace_view.py','c16'); m=C.ModelNew()
x1=torch.randn(1000)*4; x2=torch.randn(1000)*4
y1=m(x1); ok1=torch.allclose(y1, torch.nn.functional.hardsigmoid(x1))
y2=m(x2)
print('first output right when returned:', ok1, '| after second call, y1 still right:', torch.allclose(y1, torch.nn.functional.hardsigmoid(x1)), '| y1 aliases y2:', y1.data_ptr()==y2.data_ptr())
