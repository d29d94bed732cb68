import os; KB_ROOT = os.environ.get('KGYM_KERNELBENCH', '../shared/kernelbench')  # the KernelBench checkout
import sys; sys.path.insert(0,'tests/probes/wrong/tools'); from verify_lib import *
import triton, triton.language as tl
KB=KB_ROOT + '/'
print('w10 mean, scratch recycled (garbage pre-filled):')
C=load('tests/probes/wrong/w10_l1_48_mean_uninit_fp64_scratch.py','c10')
x=torch.rand(4,32,63)
junk=torch.full((4*63,),123.0,dtype=torch.float64); del junk   # free a block of the scratch's size
compare(KB+'level1/48_Mean_reduction_over_a_dimension.py','tests/probes/wrong/w10_l1_48_mean_uninit_fp64_scratch.py',[1],[x])
import torch as T_
acc=T_.full((4,63),5.0,dtype=T_.float64)  # what a recycled block may hold
C.partial_sum_kernel[(4,1,4)](x,acc,32,63,x.stride(0),x.stride(1),ROWS=8,BLOCK_N=64)
print('  with a recycled scratch holding 5.0: err of sums', (acc-x.double().sum(1)).abs().max().item())
print('w11 avgpool small sizes:')
compare(KB+'level1/45_Average_Pooling_2D.py','tests/probes/wrong/w11_l1_45_avgpool_int32_offsets.py',[11],[torch.rand(2,3,40,40)])
@triton.jit
def off_kernel(out_ptr, H, W):
    plane = tl.program_id(0)
    tl.store(out_ptr + plane, plane * H * W)
o=torch.zeros(1024,dtype=torch.int64); off_kernel[(1024,)](o, 2048, 2048)
print('  int32 plane offset at task size: plane 511 ->', o[511].item(), ' plane 512 ->', o[512].item(), '(true', 512*2048*2048, ')')
print('w12 layernorm eps:')
t=KB+'level1/40_LayerNorm.py'
compare(t,'tests/probes/wrong/w12_l1_40_layernorm_eps_1e6.py',[(4,8,8)],[torch.rand(6,4,8,8)])
compare(t,'tests/probes/wrong/w12_l1_40_layernorm_eps_1e6.py',[(4,8,8)],[torch.rand(6,4,8,8)*1e-3])
