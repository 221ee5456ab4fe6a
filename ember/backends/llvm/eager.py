"""The eager fast path's native tier: the hottest eager calls as CPython builtins, compiled from the
LLVM IR below once per process. ember.numpy asks for them (`compile_native`) once its Python fast path
has served enough calls (ember/numpy/_eager.py, `native_tier`), and installs them itself:

- `at`: `x.at`, an `_IndexUpdateHelper` of `x`, made without a Python frame;
- `getitem`: the helper's `[key]`, an `_IndexUpdateRef`;
- `set`: the ref's `.set(value)` for the commonest update (an int key into a float32 or float64 Array
  of one axis, a Python float, no keywords, outside any trace): a copy, then one element written.
  Every other call goes to the Python method it replaces, with the same arguments;
- `whole`: a reduction's lane over every axis of its operand (`sum(x)`), or MISS.

Each works on the objects' memory as NumPy and CPython lay it out (entry.py's offsets, checked by
`executable.check_layout`, and the slots' offsets, found here on a probe), and calls NumPy's C API
through its table of functions (`_ARRAY_API`). A layout this module cannot read raises LayoutError, and
ember.numpy keeps its Python fast path.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

import numpy as np

from ember.backends.llvm import capi, jit
from ember.backends.llvm import entry as E
from ember.backends.llvm.executable import LayoutError, check_layout

# NumPy's C API: function -> its index in the `_ARRAY_API` table (fixed by NumPy's ABI, 1.x and 2.x)
_NUMPY_API = {"ember_np_newcopy": 85, "ember_np_new": 94, "ember_np_view": 137, "ember_np_empty": 184}
# a whole sum of at most this many contiguous float32/float64 elements is summed here, in NumPy's order
# (pairwise, below); a larger one through NumPy's reduce, which releases the GIL
PAIRWISE_MAX = 1 << 16
_FLOAT_VALUE = 16  # PyFloatObject.ob_fval
_VAR_SIZE = 16  # PyVarObject.ob_size (a tuple's length)

_IR = """
@ember_helper_type = external global i8
@ember_ref_type = external global i8
@ember_array_type = external global i8
@ember_ndarray_type = external global i8
@ember_int_type = external global i8
@ember_float_type = external global i8
@ember_f4 = external global i8
@ember_f8 = external global i8
@ember_none = external global i8
@ember_miss = external global i8
@ember_value_error = external global i8
@ember_trace_state = external global i8
@ember_stack_name = external global i8
@ember_reduce_name = external global i8
@ember_dtype_name = external global i8
@ember_pairwise_name = external global i8
@ember_true = external global i8
@ember_set_fallback = external global i8

declare ptr @PyType_GenericAlloc(ptr, i64)
declare void @Py_IncRef(ptr)
declare void @Py_DecRef(ptr)
declare ptr @PyObject_GetAttr(ptr, ptr)
declare i32 @PyObject_IsTrue(ptr)
declare ptr @PyObject_Vectorcall(ptr, ptr, i64, ptr)
declare ptr @PyDict_GetItemWithError(ptr, ptr)
declare i64 @PyLong_AsSsize_t(ptr)
declare ptr @PyErr_Occurred()
declare void @PyErr_Clear()
declare i32 @PyErr_ExceptionMatches(ptr)
declare ptr @ember_np_newcopy(ptr, i32)
declare ptr @ember_np_view(ptr, ptr, ptr)
declare ptr @ember_np_empty(i32, ptr, ptr, i32)
declare ptr @ember_np_new(ptr, ptr, i32, ptr, ptr, ptr, i32, ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define private ptr @field(ptr %obj, i64 %offset) alwaysinline {{
  %p = getelementptr i8, ptr %obj, i64 %offset
  %v = load ptr, ptr %p
  ret ptr %v
}}

; an object of a slotted Python class, its first slot (and second, unless null) set to new references
define private ptr @slotted(ptr %type, i64 %first, ptr %a, i64 %second, ptr %b) alwaysinline {{
  %obj = call ptr @PyType_GenericAlloc(ptr %type, i64 0)
  %failed = icmp eq ptr %obj, null
  br i1 %failed, label %out, label %fill
fill:
  call void @Py_IncRef(ptr %a)
  %pa = getelementptr i8, ptr %obj, i64 %first
  store ptr %a, ptr %pa
  %one = icmp eq ptr %b, null
  br i1 %one, label %out, label %fill2
fill2:
  call void @Py_IncRef(ptr %b)
  %pb = getelementptr i8, ptr %obj, i64 %second
  store ptr %b, ptr %pb
  br label %out
out:
  ret ptr %obj
}}

; whether a trace is under way on this thread (`trace_state.stack` is a non-empty list); an error
; reading it counts as tracing, so the caller takes the Python path, which raises it again
define private i1 @tracing() {{
  %stack = call ptr @PyObject_GetAttr(ptr @ember_trace_state, ptr @ember_stack_name)
  %failed = icmp eq ptr %stack, null
  br i1 %failed, label %error, label %read
error:
  call void @PyErr_Clear()
  ret i1 1
read:
  %none = icmp eq ptr %stack, @ember_none
  br i1 %none, label %idle, label %truth
truth:
  %t = call i32 @PyObject_IsTrue(ptr %stack)
  call void @Py_DecRef(ptr %stack)
  %busy = icmp ne i32 %t, 0
  ret i1 %busy
idle:
  call void @Py_DecRef(ptr %stack)
  ret i1 0
}}

define ptr @ember_eager_at(ptr %unused, ptr %x) {{
  %h = call ptr @slotted(ptr @ember_helper_type, i64 {helper_array}, ptr %x, i64 0, ptr null)
  ret ptr %h
}}

define ptr @ember_eager_getitem(ptr %helper, ptr %key) {{
  %x = call ptr @field(ptr %helper, i64 {helper_array})
  %ref = call ptr @slotted(ptr @ember_ref_type, i64 {ref_array}, ptr %x, i64 {ref_key}, ptr %key)
  ret ptr %ref
}}

define ptr @ember_eager_set(ptr %ref, ptr %args, i64 %nargs, ptr %kwnames) {{
entry:
  %one = icmp eq i64 %nargs, 1
  %nokw = icmp eq ptr %kwnames, null
  %plain = and i1 %one, %nokw
  br i1 %plain, label %types, label %slow
types:
  %x = call ptr @field(ptr %ref, i64 {ref_array})
  %key = call ptr @field(ptr %ref, i64 {ref_key})
  %v = load ptr, ptr %args
  %xt = call ptr @field(ptr %x, i64 8)
  %kt = call ptr @field(ptr %key, i64 8)
  %vt = call ptr @field(ptr %v, i64 8)
  %is_array = icmp eq ptr %xt, @ember_array_type
  %is_int = icmp eq ptr %kt, @ember_int_type
  %is_float = icmp eq ptr %vt, @ember_float_type
  %c1 = and i1 %is_array, %is_int
  %c2 = and i1 %c1, %is_float
  br i1 %c2, label %array, label %slow
array:
  %ndp = getelementptr i8, ptr %x, i64 {ndim}
  %nd = load i32, ptr %ndp
  %vector = icmp eq i32 %nd, 1
  %descr = call ptr @field(ptr %x, i64 {descr})
  %is8 = icmp eq ptr %descr, @ember_f8
  %is4 = icmp eq ptr %descr, @ember_f4
  %real = or i1 %is8, %is4
  %fits = and i1 %vector, %real
  br i1 %fits, label %untraced, label %slow
untraced:
  %traced = call i1 @tracing()
  br i1 %traced, label %slow, label %index
index:
  %i0 = call i64 @PyLong_AsSsize_t(ptr %key)
  %maybe = icmp eq i64 %i0, -1
  br i1 %maybe, label %check, label %wrap
check:
  %err = call ptr @PyErr_Occurred()
  %raised = icmp ne ptr %err, null
  br i1 %raised, label %clear, label %wrap
clear:
  call void @PyErr_Clear()
  br label %slow
wrap:
  %dims = call ptr @field(ptr %x, i64 {dims})
  %n = load i64, ptr %dims
  %neg = icmp slt i64 %i0, 0
  %i1 = add i64 %i0, %n
  %i = select i1 %neg, i64 %i1, i64 %i0
  %inside = icmp ult i64 %i, %n
  br i1 %inside, label %copy, label %slow
copy:
  %out = call ptr @ember_np_newcopy(ptr %x, i32 0)
  %failed = icmp eq ptr %out, null
  br i1 %failed, label %fail, label %write
fail:
  ret ptr null
write:
  %data = call ptr @field(ptr %out, i64 {data})
  %vp = getelementptr i8, ptr %v, i64 {float_value}
  %d = load double, ptr %vp
  br i1 %is8, label %w8, label %w4
w8:
  %p8 = getelementptr double, ptr %data, i64 %i
  store double %d, ptr %p8
  ret ptr %out
w4:
  %f = fptrunc double %d to float
  %p4 = getelementptr float, ptr %data, i64 %i
  store float %f, ptr %p4
  ret ptr %out
slow:
  %r = call ptr @set_by_python(ptr %ref, ptr %args, i64 %nargs, ptr %kwnames)
  ret ptr %r
}}

; the Python method `set` replaces, called with the ref and the same arguments (keywords included)
define private ptr @set_by_python(ptr %ref, ptr %args, i64 %nargs, ptr %kwnames) noinline {{
entry:
  %haskw = icmp ne ptr %kwnames, null
  br i1 %haskw, label %kw, label %call
kw:
  %sp = getelementptr i8, ptr %kwnames, i64 {var_size}
  %nkw0 = load i64, ptr %sp
  br label %call
call:
  %nkw = phi i64 [0, %entry], [%nkw0, %kw]
  %total = add i64 %nargs, %nkw
  %slots = add i64 %total, 1
  %buf = alloca ptr, i64 %slots
  store ptr %ref, ptr %buf
  %rest = getelementptr ptr, ptr %buf, i64 1
  %bytes = shl i64 %total, 3
  call void @llvm.memcpy.p0.p0.i64(ptr %rest, ptr %args, i64 %bytes, i1 0)
  %n = add i64 %nargs, 1
  %r = call ptr @PyObject_Vectorcall(ptr @ember_set_fallback, ptr %buf, i64 %n, ptr %kwnames)
  ret ptr %r
}}

define ptr @ember_eager_whole(ptr %unused, ptr %args, i64 %nargs) {{
entry:
  %two = icmp eq i64 %nargs, 2
  br i1 %two, label %start, label %miss
start:
  %a = load ptr, ptr %args
  %lp = getelementptr ptr, ptr %args, i64 1
  %lanes = load ptr, ptr %lp
  %at = call ptr @field(ptr %a, i64 8)
  %is_array = icmp eq ptr %at, @ember_array_type
  %is_nd = icmp eq ptr %at, @ember_ndarray_type
  %either = or i1 %is_array, %is_nd
  br i1 %either, label %untraced, label %miss
untraced:
  %traced = call i1 @tracing()
  br i1 %traced, label %miss, label %lane
lane:
  %descr = call ptr @field(ptr %a, i64 {descr})
  %replay = call ptr @PyDict_GetItemWithError(ptr %lanes, ptr %descr)
  %none = icmp eq ptr %replay, null
  br i1 %none, label %nolane, label %attrs
nolane:
  %err = call ptr @PyErr_Occurred()
  %raised = icmp ne ptr %err, null
  br i1 %raised, label %fail, label %miss
attrs:
  %pw = call ptr @PyObject_GetAttr(ptr %replay, ptr @ember_pairwise_name)
  %pw0 = icmp eq ptr %pw, null
  br i1 %pw0, label %fail, label %pw_read
pw_read:
  call void @Py_DecRef(ptr %pw)
  %pw_true = icmp eq ptr %pw, @ember_true
  %is8 = icmp eq ptr %descr, @ember_f8
  %is4 = icmp eq ptr %descr, @ember_f4
  %real = or i1 %is8, %is4
  %ndp = getelementptr i8, ptr %a, i64 {ndim}
  %nd32 = load i32, ptr %ndp
  %nd = sext i32 %nd32 to i64
  %axes = icmp sgt i64 %nd, 0
  %flagsp = getelementptr i8, ptr %a, i64 {flags}
  %flags = load i32, ptr %flagsp
  %ca = and i32 %flags, {contiguous_aligned}
  %contiguous = icmp eq i32 %ca, {contiguous_aligned}
  %k1 = and i1 %pw_true, %real
  %k2 = and i1 %axes, %contiguous
  %ours = and i1 %k1, %k2
  br i1 %ours, label %size, label %general
size:
  %dims = call ptr @field(ptr %a, i64 {dims})
  br label %size_loop
size_loop:
  %k = phi i64 [0, %size], [%k1n, %size_body]
  %n = phi i64 [1, %size], [%n1, %size_body]
  %size_done = icmp sge i64 %k, %nd
  br i1 %size_done, label %size_end, label %size_body
size_body:
  %dp = getelementptr i64, ptr %dims, i64 %k
  %d = load i64, ptr %dp
  %n1 = mul i64 %n, %d
  %k1n = add i64 %k, 1
  br label %size_loop
size_end:
  %few = icmp sle i64 %n, {pairwise_max}
  br i1 %few, label %sum, label %general
sum:
  call void @Py_IncRef(ptr %descr)
  %res_array = call ptr @ember_np_new(ptr @ember_array_type, ptr %descr, i32 0, ptr null, ptr null, ptr null,
                                      i32 0, ptr null)
  %res0_array = icmp eq ptr %res_array, null
  br i1 %res0_array, label %fail, label %sum_write
sum_write:
  %src = call ptr @field(ptr %a, i64 {data})
  %dst = call ptr @field(ptr %res_array, i64 {data})
  br i1 %is8, label %sum8, label %sum4
sum8:
  %s8 = call double @pairwise_double(ptr %src, i64 %n)
  %t8 = fadd double 0.0, %s8
  store double %t8, ptr %dst
  ret ptr %res_array
sum4:
  %s4 = call float @pairwise_float(ptr %src, i64 %n)
  %t4 = fadd float 0.0, %s4
  store float %t4, ptr %dst
  ret ptr %res_array
general:
  %reduce = call ptr @PyObject_GetAttr(ptr %replay, ptr @ember_reduce_name)
  %r0 = icmp eq ptr %reduce, null
  br i1 %r0, label %fail, label %dtype
dtype:
  %dt = call ptr @PyObject_GetAttr(ptr %replay, ptr @ember_dtype_name)
  %d0 = icmp eq ptr %dt, null
  br i1 %d0, label %fail_reduce, label %empty
empty:
  %out = call ptr @ember_np_empty(i32 0, ptr null, ptr %dt, i32 0)
  %o0 = icmp eq ptr %out, null
  br i1 %o0, label %fail_reduce, label %view
view:
  br i1 %is_array, label %as_plain, label %as_is
as_plain:
  %pv = call ptr @ember_np_view(ptr %a, ptr null, ptr @ember_ndarray_type)
  br label %viewed
as_is:
  call void @Py_IncRef(ptr %a)
  br label %viewed
viewed:
  %v = phi ptr [%pv, %as_plain], [%a, %as_is]
  %v0 = icmp eq ptr %v, null
  br i1 %v0, label %fail_out, label %run
run:
  %buf = alloca [4 x ptr]
  store ptr %v, ptr %buf
  %b1 = getelementptr ptr, ptr %buf, i64 1
  store ptr @ember_none, ptr %b1
  %b2 = getelementptr ptr, ptr %buf, i64 2
  store ptr @ember_none, ptr %b2
  %b3 = getelementptr ptr, ptr %buf, i64 3
  store ptr %out, ptr %b3
  %res = call ptr @PyObject_Vectorcall(ptr %reduce, ptr %buf, i64 4, ptr null)
  call void @Py_DecRef(ptr %v)
  call void @Py_DecRef(ptr %reduce)
  %res0 = icmp eq ptr %res, null
  br i1 %res0, label %reduce_failed, label %done
reduce_failed:
  call void @Py_DecRef(ptr %out)
  %value_error = call i32 @PyErr_ExceptionMatches(ptr @ember_value_error)
  %empty_operand = icmp ne i32 %value_error, 0
  br i1 %empty_operand, label %refused, label %fail
refused:
  call void @PyErr_Clear()
  br label %miss
done:
  call void @Py_DecRef(ptr %res)
  %result = call ptr @ember_np_view(ptr %out, ptr null, ptr @ember_array_type)
  call void @Py_DecRef(ptr %out)
  ret ptr %result
fail_out:
  call void @Py_DecRef(ptr %out)
  br label %fail_reduce
fail_reduce:
  call void @Py_DecRef(ptr %reduce)
  br label %fail
fail:
  ret ptr null
miss:
  call void @Py_IncRef(ptr @ember_miss)
  ret ptr @ember_miss
}}
"""


def _pairwise(t: str) -> str:
    """NumPy's pairwise summation of `n` contiguous `t`s (loops_utils.h.src: a sequential sum from -0.0
    under 8 elements, 8 accumulators up to 128, halves at a multiple of 8 above), in its order exactly:
    no fast-math flag lets LLVM reassociate it."""
    acc = [f"%r{j}" for j in range(8)]
    load0 = "\n".join(f"  %q{j} = getelementptr {t}, ptr %a, i64 {j}\n  %r{j}0 = load {t}, ptr %q{j}" for j in range(8))
    phis = "\n".join(f"  %r{j} = phi {t} [%r{j}0, %block], [%s{j}, %body]" for j in range(8))
    adds = "\n".join(f"  %o{j} = add i64 %i, {j}\n  %p{j} = getelementptr {t}, ptr %a, i64 %o{j}\n"
                     f"  %v{j} = load {t}, ptr %p{j}\n  %s{j} = fadd {t} {acc[j]}, %v{j}" for j in range(8))
    return f"""
; init + a[first] + ... + a[n - 1], one element after the other
define private {t} @sequential_{t}(ptr %a, i64 %first, i64 %n, {t} %init) alwaysinline {{{{
entry:
  br label %loop
loop:
  %i = phi i64 [%first, %entry], [%i1, %body]
  %r = phi {t} [%init, %entry], [%r1, %body]
  %done = icmp sge i64 %i, %n
  br i1 %done, label %end, label %body
body:
  %p = getelementptr {t}, ptr %a, i64 %i
  %v = load {t}, ptr %p
  %r1 = fadd {t} %r, %v
  %i1 = add i64 %i, 1
  br label %loop
end:
  ret {t} %r
}}}}

define private {t} @pairwise_{t}(ptr %a, i64 %n) {{{{
entry:
  %small = icmp slt i64 %n, 8
  br i1 %small, label %seq, label %mid
seq:
  %r_s = call {t} @sequential_{t}(ptr %a, i64 0, i64 %n, {t} -0.0)
  ret {t} %r_s
mid:
  %fits = icmp sle i64 %n, 128
  br i1 %fits, label %block, label %split
block:
{load0}
  %m = and i64 %n, -8
  br label %loop
loop:
  %i = phi i64 [8, %block], [%i8, %body]
{phis}
  %more = icmp slt i64 %i, %m
  br i1 %more, label %body, label %combine
body:
{adds}
  %i8 = add i64 %i, 8
  br label %loop
combine:
  %c01 = fadd {t} %r0, %r1
  %c23 = fadd {t} %r2, %r3
  %c45 = fadd {t} %r4, %r5
  %c67 = fadd {t} %r6, %r7
  %c03 = fadd {t} %c01, %c23
  %c47 = fadd {t} %c45, %c67
  %c = fadd {t} %c03, %c47
  %r_t = call {t} @sequential_{t}(ptr %a, i64 %m, i64 %n, {t} %c)
  ret {t} %r_t
split:
  %half = lshr i64 %n, 1
  %n2 = and i64 %half, -8
  %left = call {t} @pairwise_{t}(ptr %a, i64 %n2)
  %a2 = getelementptr {t}, ptr %a, i64 %n2
  %rest = sub i64 %n, %n2
  %right = call {t} @pairwise_{t}(ptr %a2, i64 %rest)
  %sum = fadd {t} %left, %right
  ret {t} %sum
}}}}
"""

_SET_DOC = ("set($self, values, *, indices_are_sorted=False, unique_indices=False, mode=None)\n--\n\n"
            "A copy of the array with x[key] = values (duplicated indices: one of the values wins).")
_GETITEM_DOC = "__getitem__($self, key, /)\n--\n\nThe update reference `x.at[key]`."
_AT_DOC = "at(x, /)\n--\n\n`x.at`: JAX's functional index updates of `x`."
_WHOLE_DOC = "whole(a, lanes, /)\n--\n\nThe reduce lane of a's dtype over every axis of `a`, or MISS."
_libraries: list = []  # the compiled code, kept for the process's life (its builtins point into it)


def compile_native(targets: Mapping[str, object]) -> dict[str, object]:
    """The native callables for ember.numpy's eager fast path (see the module's docstring), compiled for
    the objects in `targets`: "helper" and "ref" (the `.at` classes), "array" (ember's Array),
    "set" (the Python method the native `set` falls back to), "miss" (the MISS marker), "trace_state"."""
    check_layout()
    helper, ref = targets["helper"], targets["ref"]
    offsets = {"helper_array": _slot_offset(helper, "array"), "ref_array": _slot_offset(ref, "array"),
               "ref_key": _slot_offset(ref, "key"), "ndim": E.ARRAY_NDIM, "descr": E.ARRAY_DESCR,
               "dims": E.ARRAY_DIMS, "data": E.ARRAY_DATA, "float_value": _FLOAT_VALUE, "var_size": _VAR_SIZE,
               "flags": E.ARRAY_FLAGS, "contiguous_aligned": E.NPY_C_CONTIGUOUS | E.NPY_ALIGNED,
               "pairwise_max": PAIRWISE_MAX}
    _check_scalars()
    keep = {"ember_helper_type": helper, "ember_ref_type": ref, "ember_array_type": targets["array"],
            "ember_ndarray_type": np.ndarray, "ember_int_type": int, "ember_float_type": float,
            "ember_f4": np.dtype(np.float32), "ember_f8": np.dtype(np.float64), "ember_none": None,
            "ember_miss": targets["miss"], "ember_value_error": ValueError,
            "ember_trace_state": targets["trace_state"], "ember_stack_name": "stack",
            "ember_reduce_name": "reduce", "ember_dtype_name": "dtype", "ember_pairwise_name": "pairwise",
            "ember_true": True, "ember_set_fallback": targets["set"]}
    symbols = {name: id(obj) for name, obj in keep.items()} | _numpy_api()
    ir = (_IR + _pairwise("float") + _pairwise("double")).format(**offsets)
    library = jit.compile_ir(ir, symbols, "ember_eager_set")
    _libraries.append((library, keep))

    def native(name: str, flags: int, doc: str, shown: str | None = None) -> capi.MethodDef:
        return capi.definition(shown or name, library.address(f"ember_eager_{name}"), flags, doc)

    return {"at": capi.builtin(native("at", capi.METH_O, _AT_DOC)),
            "getitem": capi.method(helper, native("getitem", capi.METH_O, _GETITEM_DOC, "__getitem__")),
            "set": capi.method(ref, native("set", capi.METH_FASTCALL | capi.METH_KEYWORDS, _SET_DOC)),
            "whole": capi.builtin(native("whole", capi.METH_FASTCALL, _WHOLE_DOC))}


def _numpy_api() -> dict[str, int]:
    """The addresses of the NumPy C API functions the code calls, read from NumPy's table."""
    try:
        from numpy._core import _multiarray_umath as multiarray
    except ImportError:  # NumPy 1.x
        from numpy.core import _multiarray_umath as multiarray
    table = capi.capsule_pointer(multiarray._ARRAY_API, None)
    return {name: ctypes.c_void_p.from_address(table + 8 * index).value for name, index in _NUMPY_API.items()}


def _slot_offset(cls: type, name: str) -> int:
    """Where an instance of `cls` keeps its `__slots__` entry `name`, found on a probe instance."""
    probe, marker = object.__new__(cls), object()
    setattr(probe, name, marker)
    for offset in range(16, cls.__basicsize__, 8):
        if ctypes.c_void_p.from_address(id(probe) + offset).value == id(marker):
            return offset
    raise LayoutError(f"{cls.__name__}.{name} is not a slot this module can find")


def _check_scalars() -> None:
    """A float's value and a tuple's length where the code reads them."""
    value, names = 2.5, ("a", "b", "c")
    if ctypes.c_double.from_address(id(value) + _FLOAT_VALUE).value != value \
            or ctypes.c_ssize_t.from_address(id(names) + _VAR_SIZE).value != 3:
        raise LayoutError("this Python lays out floats or tuples differently than the eager native code reads them")
