import os; KB_ROOT = os.environ.get('KGYM_KERNELBENCH', '../shared/kernelbench')  # the KernelBench checkout
import sys; sys.path.insert(0,'tests/probes/wrong/tools'); from verify_lib import *
KB=KB_ROOT + '/'
t=KB+'level1/98_KLDivLoss.py'; c='tests/probes/wrong/w13_l1_98_kldiv_naive_tlogt.py'
p=torch.rand(8,100).softmax(-1); tt=torch.rand(8,100).softmax(-1)
print('positive targets'); compare(t,c,[],[p,tt])
oh=torch.zeros(8,100); oh[torch.arange(8), torch.randint(0,100,(8,))]=1
print('one-hot targets'); compare(t,c,[],[p,oh])
t=KB+'level1/24_LogSoftmax.py'; c='tests/probes/wrong/w14_l1_24_logsoftmax_block_cap.py'
print('rows 24576'); compare(t,c,[1],[torch.randn(2,24576)])
print('rows 40000'); compare(t,c,[1],[torch.randn(2,40000)])
