"""Ember's native thread pool: `ember_parallel_for(fn, ctx, n)` runs `fn(ctx, i)` for every chunk i < n
on the calling thread and the pool's workers, and returns when all have run.

The pool is a small LLVM module (compiled once per process, cached on disk like any other code);
its workers are native threads (`pthread_create`), never Python threads: they need no GIL, and a
worker that has just finished a job spins briefly before sleeping on a futex, so the kernels of one
call reach it in well under a microsecond. Chunks are claimed one at a time with a compare-and-swap
on a word holding (job generation, next chunk), so a worker can never take a chunk of a job that is
over. The caller always runs chunks itself and only waits for chunks that a worker has started, so
a job completes whatever the workers do (after a fork, with none). One job runs at a time: a caller
that finds the pool busy (another Python thread's call) runs its chunks alone, so concurrent calls
never oversubscribe the cores. Which thread runs a chunk never changes what it computes: kernels
split their work into chunks by its shape alone (loops.py), so results are bitwise identical for any
thread count.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading

from ember import config
from ember.backends import one_time_setup
from ember.backends.llvm import jit

PARALLEL_FOR = "ember_parallel_for"
# A loop runs in chunks on the pool when its work (iterations times computing ops, at least one) reaches
# PARALLEL_MIN_WORK; a chunk holds at least MIN_CHUNK_WORK of it, and there are at most MAX_CHUNKS
# (enough to balance 16 threads). Measured on 2 AVX-512 cores: a float32 exp + multiply pass breaks
# even near 2**16 elements when the workers are awake (a job's dispatch costs ~1-2 us). These decide
# results (a whole-array reduction combines one partial per chunk), so they are part of the code
# signature (entry.py) and never depend on the thread count.
PARALLEL_MIN_WORK = 1 << 17
MIN_CHUNK_WORK = 1 << 15
MAX_CHUNKS = 64
# about 50 us of pause instructions before a worker with nothing to do sleeps on the futex: the next
# kernel of the same call finds it awake, and an idle process stops spinning soon after its last call
SPIN = 4096
_FUTEX = 202  # x86_64 Linux syscall number
_WAIT, _WAKE = 128, 129  # FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE

_IR = r"""
@job_fn = internal global ptr null, align 8
@job_ctx = internal global ptr null, align 8
@job_bound = internal global i64 0, align 64   ; (generation << 32) | number of chunks
@job_next = internal global i64 0, align 64    ; (generation << 32) | next chunk to claim
@job_done = internal global i64 0, align 64    ; chunks of the current job finished
@generation = internal global i64 0, align 8
@busy = internal global i32 0, align 64        ; 1 while a caller owns the job slot
@wake = internal global i32 0, align 64        ; futex word: bumped when a job is published
@sleepers = internal global i32 0, align 64
@limit = internal global i32 1, align 64       ; threads that may work (the caller counts as one)
@quit = internal global i32 0, align 64

declare i64 @syscall(i64, ...)
{pause_decl}

define internal void @pause() {{
  {pause_call}
  ret void
}}

; claim chunks of the published job until none is left
define internal void @run_chunks() {{
entry:
  br label %loop
loop:
  %v = load atomic i64, ptr @job_next seq_cst, align 8
  %b = load atomic i64, ptr @job_bound seq_cst, align 8
  %vg = lshr i64 %v, 32
  %bg = lshr i64 %b, 32
  %same = icmp eq i64 %vg, %bg
  br i1 %same, label %check, label %loop     ; a job is being published: read again
check:
  %i = and i64 %v, 4294967295
  %n = and i64 %b, 4294967295
  %more = icmp ult i64 %i, %n
  br i1 %more, label %claim, label %done
claim:
  %v1 = add i64 %v, 1
  %r = cmpxchg ptr @job_next, i64 %v, i64 %v1 seq_cst seq_cst, align 8
  %ok = extractvalue {{ i64, i1 }} %r, 1
  br i1 %ok, label %run, label %loop
run:
  %fn = load atomic ptr, ptr @job_fn monotonic, align 8
  %ctx = load atomic ptr, ptr @job_ctx monotonic, align 8
  call void %fn(ptr %ctx, i64 %i)
  %d = atomicrmw add ptr @job_done, i64 1 seq_cst, align 8
  br label %loop
done:
  ret void
}}

define ptr @ember_pool_worker(ptr %arg) {{
entry:
  %me64 = ptrtoint ptr %arg to i64
  %me = trunc i64 %me64 to i32
  %seen.slot = alloca i32, align 4
  %spins.slot = alloca i32, align 4
  %w0 = load atomic i32, ptr @wake seq_cst, align 4
  store i32 %w0, ptr %seen.slot, align 4
  store i32 0, ptr %spins.slot, align 4
  br label %wait
wait:
  %q = load atomic i32, ptr @quit seq_cst, align 4
  %stop = icmp ne i32 %q, 0
  br i1 %stop, label %exit, label %poll
poll:
  %seen = load i32, ptr %seen.slot, align 4
  %w = load atomic i32, ptr @wake seq_cst, align 4
  %new = icmp ne i32 %w, %seen
  br i1 %new, label %got, label %idle
idle:
  %spins = load i32, ptr %spins.slot, align 4
  %long = icmp uge i32 %spins, {spin}
  br i1 %long, label %sleep, label %spin
spin:
  call void @pause()
  %spins1 = add i32 %spins, 1
  store i32 %spins1, ptr %spins.slot, align 4
  br label %wait
sleep:
  %s0 = atomicrmw add ptr @sleepers, i32 1 seq_cst, align 4
  %seen64 = zext i32 %seen to i64
  %rc = call i64 (i64, ...) @syscall(i64 {futex}, ptr @wake, i64 {wait_op}, i64 %seen64, ptr null)
  %s1 = atomicrmw sub ptr @sleepers, i32 1 seq_cst, align 4
  br label %wait
got:
  store i32 %w, ptr %seen.slot, align 4
  %lim = load atomic i32, ptr @limit seq_cst, align 4
  %allowed = icmp ult i32 %me, %lim
  br i1 %allowed, label %work, label %idle.now
idle.now:                                   ; not one of the threads allowed now: sleep at once
  store i32 {spin}, ptr %spins.slot, align 4
  br label %wait
work:
  store i32 0, ptr %spins.slot, align 4
  call void @run_chunks()
  br label %wait
exit:
  ret ptr null
}}

define void @{parallel_for}(ptr %fn, ptr %ctx, i64 %n) {{
entry:
  %lim = load atomic i32, ptr @limit seq_cst, align 4
  %one = icmp ule i32 %lim, 1
  %few = icmp ule i64 %n, 1
  %alone = or i1 %one, %few
  br i1 %alone, label %serial, label %own
own:
  %r = cmpxchg ptr @busy, i32 0, i32 1 seq_cst seq_cst, align 4
  %ok = extractvalue {{ i32, i1 }} %r, 1
  br i1 %ok, label %publish, label %serial
publish:
  %g = load i64, ptr @generation, align 8
  %g1 = add i64 %g, 1
  store i64 %g1, ptr @generation, align 8
  store atomic ptr %fn, ptr @job_fn monotonic, align 8
  store atomic ptr %ctx, ptr @job_ctx monotonic, align 8
  store atomic i64 0, ptr @job_done seq_cst, align 8
  %tag = shl i64 %g1, 32
  %bound = or i64 %tag, %n
  store atomic i64 %bound, ptr @job_bound seq_cst, align 8
  store atomic i64 %tag, ptr @job_next seq_cst, align 8
  %w = atomicrmw add ptr @wake, i32 1 seq_cst, align 4
  %sl = load atomic i32, ptr @sleepers seq_cst, align 4
  %anyone = icmp ne i32 %sl, 0
  br i1 %anyone, label %wakeup, label %work
wakeup:
  %rc = call i64 (i64, ...) @syscall(i64 {futex}, ptr @wake, i64 {wake_op}, i64 2147483647)
  br label %work
work:
  call void @run_chunks()
  br label %join
join:
  %d = load atomic i64, ptr @job_done seq_cst, align 8
  %all = icmp uge i64 %d, %n
  br i1 %all, label %release, label %spinjoin
spinjoin:
  call void @pause()
  br label %join
release:
  store atomic i32 0, ptr @busy seq_cst, align 4
  ret void
serial:
  br label %sloop
sloop:
  %i = phi i64 [ 0, %serial ], [ %i1, %sloop ]
  call void %fn(ptr %ctx, i64 %i)
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %sloop, label %sdone
sdone:
  ret void
}}

define void @ember_pool_set_limit(i32 %n) {{
  store atomic i32 %n, ptr @limit seq_cst, align 4
  ret void
}}

define void @ember_pool_quit() {{
  store atomic i32 1, ptr @quit seq_cst, align 4
  %w = atomicrmw add ptr @wake, i32 1 seq_cst, align 4
  %rc = call i64 (i64, ...) @syscall(i64 {futex}, ptr @wake, i64 {wake_op}, i64 2147483647)
  ret void
}}
"""


class _Pool:
    """The process's pool: its library (kept loaded until exit) and the worker threads started."""

    def __init__(self) -> None:
        x86 = jit.target().triple.startswith(("x86_64", "i686", "i386"))
        text = _IR.format(pause_decl="declare void @llvm.x86.sse2.pause()" if x86 else "",
                          pause_call="call void @llvm.x86.sse2.pause()" if x86 else "", spin=SPIN,
                          futex=_FUTEX, wait_op=_WAIT, wake_op=_WAKE, parallel_for=PARALLEL_FOR)
        self.library = jit.compile_ir(text, {}, PARALLEL_FOR)
        self.parallel_for = self.library.address(PARALLEL_FOR)
        self._worker = self.library.address("ember_pool_worker")
        self._set_limit = ctypes.CFUNCTYPE(None, ctypes.c_int32)(self.library.address("ember_pool_set_limit"))
        self._quit = ctypes.CFUNCTYPE(None)(self.library.address("ember_pool_quit"))
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_void_p]
        self._libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        self.threads: list[int] = []  # pthread ids of workers 1, 2, ...
        self.limit = 1

    def resize(self, n: int) -> None:
        """Let `n` threads work on each job (the caller and n - 1 workers), starting workers as needed."""
        while len(self.threads) < n - 1:
            tid = ctypes.c_ulong()
            rc = self._libc.pthread_create(ctypes.byref(tid), None, self._worker, len(self.threads) + 1)
            if rc:
                raise OSError(rc, f"ember: starting native worker thread {len(self.threads) + 1} failed: "
                                  f"{os.strerror(rc)}; set EMBER_NUM_THREADS=1 to run without workers")
            self.threads.append(tid.value)
        self.limit = n
        self._set_limit(n)

    def stop(self) -> None:
        """End the workers and wait for them (at exit, before the code they run is unloaded)."""
        self._quit()
        for tid in self.threads:
            self._libc.pthread_join(tid, None)
        self.threads = []

    def forked(self) -> None:
        """In a forked child: the workers did not come along; start them again on next use."""
        self.threads = []
        self._set_limit(1)
        self.limit = 1


_pool: _Pool | None = None
_lock = threading.Lock()


def pool() -> _Pool:
    """The process's pool, made on first use (its workers start on `ensure_threads`)."""
    global _pool
    if _pool is None:
        with _lock, one_time_setup():
            if _pool is None:
                _pool = _Pool()
                atexit.register(_pool.stop)
                config.watch("ember_num_threads", ensure_threads)
                if hasattr(os, "register_at_fork"):
                    os.register_at_fork(after_in_child=_pool.forked)
    return _pool


def ensure_threads(n: int | None = None) -> None:
    """Make the pool run jobs on `n` threads (default `ember.config.num_threads`)."""
    n = config.num_threads if n is None else n
    p = pool()
    if p.limit != n:
        with _lock, one_time_setup():
            p.resize(n)


def symbols() -> dict[str, int]:
    """The pool's entry for generated code to link against."""
    return {PARALLEL_FOR: pool().parallel_for}
