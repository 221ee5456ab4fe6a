"""Ember's benchmarks: the seed workloads side by side with hand-written NumPy, JAX and PyTorch.

Run `python -m benchmarks` (see benchmarks/README.md). Layout: harness (timing, checks, interleaving),
frameworks (one interface per implementation kind), peers (detecting JAX and PyTorch), workloads/ (one
module per seed), derived (the ratios the seeds ask about), report (Markdown, JSON, plots), environment.
"""
