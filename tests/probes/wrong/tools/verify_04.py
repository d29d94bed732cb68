import os; KB_ROOT = os.environ.get('KGYM_KERNELBENCH', '../shared/kernelbench')  # the KernelBench checkout
import sys; sys.path.insert(0,'tests/probes/wrong/tools'); from verify_lib import *
KB=KB_ROOT + '/'
t=KB+'level1/35_GroupNorm_.py'; c='tests/probes/wrong/w08_l1_35_groupnorm_channel_pad_unmasked.py'
print('C=16,G=8 (cpg 2)'); compare(t,c,[16,8],[torch.rand(2,16,9,9)])
print('C=24,G=8 (cpg 3)'); compare(t,c,[24,8],[torch.rand(2,24,9,9)])
t=KB+'level2/76_Gemm_Add_ReLU.py'; c='tests/probes/wrong/w09_l2_76_gemm_cached_weight_t.py'
print('fresh model'); compare(t,c,[64,48,(48,)],[torch.rand(20,64)])
T=load(t,'r9'); C=load(c,'c9')
torch.manual_seed(0); r=T.Model(64,48,(48,)); torch.manual_seed(1); n=C.ModelNew(64,48,(48,))
n.load_state_dict(r.state_dict())
x=torch.rand(20,64)
with torch.no_grad(): print('after load_state_dict(reference): max err', (r(x)-n(x)).abs().max().item())
