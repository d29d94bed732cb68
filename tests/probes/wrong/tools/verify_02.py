import os; KB_ROOT = os.environ.get('KGYM_KERNELBENCH', '../shared/kernelbench')  # the KernelBench checkout
import sys; sys.path.insert(0,'tests/probes/wrong/tools'); from verify_lib import *
KB=KB_ROOT + '/'
T=load(KB+'level1/35_GroupNorm_.py','r'); C=load('tests/probes/wrong/w02_l1_35_groupnorm_ignores_affine.py','c')
x=torch.rand(2,16,8,8)
torch.manual_seed(0); r=T.Model(16,8); torch.manual_seed(0); c=C.ModelNew(16,8)
with torch.no_grad():
    print('default affine: err', (r(x)-c(x)).abs().max().item())
    for m in (r.gn, c.gn): m.weight.copy_(torch.linspace(0.5,2,16)); m.bias.copy_(torch.linspace(-1,1,16))
    print('trained affine: err', (r(x)-c(x)).abs().max().item())
print('softmax'); 
xs=torch.rand(4,3000); compare(KB+'level1/23_Softmax.py','tests/probes/wrong/w03_l1_23_softmax_first_block_max.py',[],[xs])
xs=torch.zeros(4,3000); xs[:,2000]=100.0; compare(KB+'level1/23_Softmax.py','tests/probes/wrong/w03_l1_23_softmax_first_block_max.py',[],[xs])
xs=torch.randn(64,4096)*100; compare(KB+'level1/23_Softmax.py','tests/probes/wrong/w03_l1_23_softmax_first_block_max.py',[],[xs])
print('sum split (interpreter: sequential programs)')
compare(KB+'level1/47_Sum_reduction_over_a_dimension.py','tests/probes/wrong/w04_l1_47_sum_split_nonatomic.py',[1],[torch.rand(2,300,70)])
