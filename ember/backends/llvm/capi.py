"""Native code as CPython callables: a builtin function or a method descriptor over a function that
LLVM compiled, made through ctypes (`PyCFunction_NewEx`, `PyDescr_NewMethod`). Their `PyMethodDef`s
live as long as the process: a callable keeps only a pointer to its definition."""

from __future__ import annotations

import ctypes

METH_O = 0x0008
METH_FASTCALL = 0x0080
METH_KEYWORDS = 0x0002


class MethodDef(ctypes.Structure):
    """CPython's PyMethodDef."""

    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


# (prototypes of their own: ctypes.pythonapi's function objects are shared, and others set their types)
_new_function = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCFunction_NewEx", ctypes.pythonapi))
_new_method = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)(
    ("PyDescr_NewMethod", ctypes.pythonapi))
_decref = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("Py_DecRef", ctypes.pythonapi))
capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_definitions: list[MethodDef] = []  # every definition made: never freed


def definition(name: str, address: int, flags: int, doc: str | None = None) -> MethodDef:
    """A PyMethodDef for the native function at `address`, kept for the process's life."""
    d = MethodDef(name.encode(), address, flags, None if doc is None else doc.encode())
    _definitions.append(d)
    return d


def _owned(address: int | None) -> object:
    """The object of the new reference at `address`, which a C function returned (None: it raised)."""
    if not address:
        raise RuntimeError("CPython could not make the native callable")
    obj = ctypes.cast(ctypes.c_void_p(address), ctypes.py_object).value  # (a reference of its own)
    # (the C function's reference is dropped: `obj` holds the one that lasts)
    _decref(address)
    return obj


def builtin(d: MethodDef, self: object = None) -> object:
    """A builtin function calling `d`'s function with `self` (kept by the builtin; None passes NULL)."""
    return _owned(_new_function(ctypes.addressof(d), None if self is None else id(self), None))


def method(cls: type, d: MethodDef) -> object:
    """A method descriptor of `cls` calling `d`'s function with the instance as its first argument."""
    return _owned(_new_method(cls, ctypes.addressof(d)))
