import os; KB_ROOT = os.environ.get('KGYM_KERNELBENCH', '../shared/kernelbench')  # the KernelBench checkout
import sys; sys.path.insert(0,'tests/probes/wrong/tools'); from verify_lib import *
task=KB_ROOT + '/level2/1_Conv2D_ReLU_BiasAdd.py'; cand='tests/probes/wrong/w01_l2_1_conv_cin_cout_swap.py'
print('in=out=8'); compare(task,cand,[8,8,3,(8,1,1)],[torch.rand(2,8,10,10)])
print('in=4,out=8'); compare(task,cand,[4,8,3,(8,1,1)],[torch.rand(2,4,10,10)])
