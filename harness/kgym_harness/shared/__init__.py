"""What both sides of an evaluation use: the messages between judge and runner (transport.py), the device
memory they share (cudashare.py), Triton's trusted C modules (tritoncache.py: the judge builds them, runners
read them), timing and profiling (timing.py, profile.py), and the few functions both need (report.py,
models.py).  Nothing here imports the judge or the runner (tests/test_boundary.py).
"""
