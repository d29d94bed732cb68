import os; KB_ROOT = os.environ.get('KGYM_KERNELBENCH', '../shared/kernelbench')  # the KernelBench checkout
import sys; sys.path.insert(0,'tests/probes/wrong/tools'); from verify_lib import *
KB=KB_ROOT + '/'
C=load('tests/probes/wrong/w07_l1_21_sigmoid_mask_le.py','c7')
n=3000; x=torch.randn(n); buf=torch.full((n+8,), 7.0); y=buf[:n]
C.sigmoid_kernel[(3,)](x, y, n, BLOCK=1024)
print('sigmoid values ok:', torch.allclose(y, torch.sigmoid(x)), ' neighbour buf[n] was 7.0, now', buf[n].item())
print('frobenius (interpreter, sequential)')
compare(KB+'level1/37_FrobeniusNorm_.py','tests/probes/wrong/w06_l1_37_frobenius_last_program_reduces.py',[],[torch.rand(4,8,30,30)])
C6=load('tests/probes/wrong/w06_l1_37_frobenius_last_program_reduces.py','c6')
# emulate a GPU schedule in which the last program runs before the others have stored their partials
x=torch.rand(4,8,30,30); n=x.numel(); nb=(n+4095)//4096
partial=torch.zeros(nb); norm=torch.zeros(1)
C6.sumsq_kernel[(nb,)](x, partial, norm, n, BLOCK=4096, RBLOCK=1024)
part_only_last = partial.clone(); part_only_last[:-1]=0
print('norm true', x.norm().item(), ' norm if last program ran first', part_only_last.sum().sqrt().item())
print('argmax')
xa=torch.rand(4,32,63); compare(KB+'level1/51_Argmax_over_a_dimension.py','tests/probes/wrong/w05_l1_51_argmax_last_tie.py',[1],[xa])
xa=torch.rand(4,32,63).half().float(); compare(KB+'level1/51_Argmax_over_a_dimension.py','tests/probes/wrong/w05_l1_51_argmax_last_tie.py',[1],[xa])
xa=torch.rand(4,512,63)+100; compare(KB+'level1/51_Argmax_over_a_dimension.py','tests/probes/wrong/w05_l1_51_argmax_last_tie.py',[1],[xa])
