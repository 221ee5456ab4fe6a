"""The reference backend: runs a graph with each primitive's numpy rule.

It is the oracle every optimized or compiled path is tested against. `compile` generates one
straight-line Python function per graph (one call per node, values in local variables, released
with `del` where the memory plan frees them), so a call costs one Python frame rather than an
interpreter loop; `NumpyExecutable.source` shows that code. A fusion node's body is emitted inline
(one call per body node under a `# fusion <kind> <line>` comment), compiled once with the graph.
Where the plan writes a value in place (`plan.inplace`), the node calls its ufunc with `out=` the
operand, or copies its result into the operand: the backend writes exactly the buffers the plan
names, so a wrong plan gives wrong values and the differential tests see them.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping

import numpy as np

from ember.backends import one_time
from ember.passes.memory import CONST, INPUT, Plan, last_uses
from ember.tracer import prims as P
from ember.tracer.array import Array
from ember.tracer.ir import Graph, Literal, Node, Var
from ember.tracer.primitive import impl_rules, primitives, ufunc_of

# Tests set this to check every node's result against its aval (shape and dtype).
CHECK = False

# prim -> (ufunc, the dtypes for which the prim's numpy reference is exactly that ufunc, None: all),
# from the primitives' facts: where the plan writes a node's result in place, it calls the ufunc with
# `out=` (other prims copy their result). A name is scipy.special's ufunc of that name, imported only
# by a graph that uses it (importing scipy.special costs more than 0.1 s).
INPLACE_UFUNCS: dict = {prim: (prim.ufunc, prim.ufunc_dtypes) for prim in primitives.values()
                        if prim.ufunc is not None}

# scipy.special, imported when a graph that uses it compiles (the prims' numpy rules import it too, but
# they run later, inside a call): more than 0.1 s, which `import ember` does not pay
_scipy_special = one_time(functools.partial(importlib.import_module, "scipy.special"))


def inplace_ufunc(node: Node) -> Callable | None:
    """The ufunc that computes `node` exactly as its numpy reference does, with `out=`, or None."""
    prim = node.prim
    if prim.ufunc is None or len(node.outputs) != 1:
        return None
    if prim.ufunc_dtypes is not None and node.outputs[0].aval.dtype not in prim.ufunc_dtypes:
        return None
    return ufunc_of(prim)


def _writable(x) -> bool:
    # 0-d results of ufuncs are NumPy scalars, which have no buffer to write
    return type(x) is np.ndarray and x.flags.writeable


def _inplace(ufunc, out, *args):
    """`ufunc(*args)` written into `out` (the operand whose buffer the plan reuses)."""
    return ufunc(*args, out=out) if _writable(out) else ufunc(*args)


def _copy_into(out, result):
    """`result` copied into `out` (the operand whose buffer the plan reuses), which it then is."""
    if not _writable(out):
        return result
    np.copyto(out, result)
    return out


class NumpyExecutable:
    """A graph compiled to a Python function over NumPy arrays, under the memory plan it is given."""

    def __init__(self, graph: Graph, plan: Plan, check: bool | None = None):
        self.graph = graph
        self.plan = plan
        self.check = CHECK if check is None else check
        gen = _Codegen(graph, self.plan, self.check)
        self.source = gen.source
        exec(compile(self.source, "<ember numpy graph>", "exec"), gen.namespace)  # noqa: S102 - our own code
        self._run = gen.namespace["run"]
        self._n_inputs = len(graph.inputs)

    source_suffix = ".source.py"  # the file name ending of `source` in dumps

    def __call__(self, *args, out: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """The outputs of the graph on `args`; given `out` (checked arrays, one per output: see
        ember/backends/outputs.py), the results are copied into them and they are returned."""
        if len(args) != self._n_inputs:
            raise TypeError(f"the executable takes {self._n_inputs} arrays, got {len(args)}")
        if Array in map(type, args):  # the references run on the data (no Array methods inside)
            args = [a.view(np.ndarray) if type(a) is Array else a for a in args]
        results = self._run(*args)
        if out is None:
            if len(results) == 1:  # the common case, without a loop
                r = results[0]
                return [r.view(Array) if type(r) is np.ndarray else r]
            return [r.view(Array) if type(r) is np.ndarray else r for r in results]
        for o, r in zip(out, results):
            np.copyto(o, r)
        return list(out)


_READ_ONLY = {INPUT: "a user input that is not donated", CONST: "a const (a closed-over array)"}


def checked_inplace(graph: Graph, plan: Plan) -> dict[Var, Var]:
    """`plan.inplace`, checked against the contract: each entry maps a node's output to an operand of
    that node of the same shape and dtype, which is neither a user input nor a const."""
    inplace = dict(getattr(plan, "inplace", None) or {})
    producer = {v: node for node in graph.nodes for v in node.outputs}
    for out, operand in inplace.items():
        node = producer.get(out)
        if node is None:
            raise ValueError(f"the memory plan writes a {out.aval.str_short()} in place that no node makes")
        where = f"the result of {node.prim.name} at {node.loc}"
        if operand not in node.inputs:
            raise ValueError(f"the memory plan writes {where} into a value that is not its operand")
        if (out.aval.shape, out.aval.dtype) != (operand.aval.shape, operand.aval.dtype):
            raise ValueError(f"the memory plan writes {where}, {out.aval.str_short()}, into an operand of type "
                             f"{operand.aval.str_short()}")
        if plan.buffer_class.get(operand) in _READ_ONLY:
            raise ValueError(f"the memory plan writes {where} into {_READ_ONLY[plan.buffer_class[operand]]}, "
                             "which is read-only")
    return inplace


def _views_to_own(graph: Graph, written) -> set[Var]:
    """Outputs of view prims that share memory with a buffer the plan writes: they get their own
    array, since the plan counts each of them as its own buffer."""
    root: dict[Var, Var] = {}
    for node in graph.nodes:
        if node.prim.may_view and node.inputs and isinstance(node.inputs[0], Var):
            src = node.inputs[0]
            root[node.outputs[0]] = root.get(src, src)
    hot = {root.get(v, v) for v in written}
    return {v for v, r in root.items() if r in hot}


class _Codegen:
    """Writes the straight-line function `run` for a graph and its plan, and the namespace it runs in."""

    def __init__(self, graph: Graph, plan: Plan, check: bool):
        self.check = check
        self.namespace: dict = {"_array": np.array, "_asarray": np.asarray, "_check": _check,
                                "_inplace": _inplace, "_copy_into": _copy_into}
        self.lines: list[str] = []
        self.literals: dict[tuple, str] = {}
        self.objects: dict[int, str] = {}
        inplace = checked_inplace(graph, plan)
        own = _views_to_own(graph, set(inplace.values()))
        names: dict[Var, str] = {}
        args = []
        for i, v in enumerate(graph.inputs):
            names[v] = f"a{i}"
            args.append(names[v])
        for i, (v, val) in enumerate(zip(graph.consts, graph.const_values)):
            names[v] = f"c{i}"
            self.namespace[names[v]] = val
        external = set(graph.inputs) | set(graph.consts)
        for j, node in enumerate(graph.nodes):
            targets = {k: names[inplace[v]] for k, v in enumerate(node.outputs) if v in inplace}
            self.node(node, names, f"v{j}", targets, own=node.outputs[0] in own if node.outputs else False)
            dead = [names[v] for v in plan.frees[j] if v not in external]  # the caller holds inputs
            if dead:
                self.lines.append(f"    del {', '.join(dead)}")
        self.lines.append(f"    return [{', '.join(self.returns(graph, names, external))}]")
        self.source = f"def run({', '.join(args)}):\n" + "\n".join(self.lines) + "\n"

    def returns(self, graph: Graph, names, external) -> list[str]:
        """Outputs that may alias an input, a const or a read-only view, or that repeat an earlier
        output, are copied: the caller owns every array it gets back."""
        producer = {v: node for node in graph.nodes for v in node.outputs}
        rets = []
        for i, a in enumerate(graph.outputs):
            copy = (isinstance(a, Literal) or a in external or (a in producer and _may_view(producer[a], a))
                    or a in graph.outputs[:i])
            rets.append(f"{'_array' if copy else '_asarray'}({self.ref(a, names)})")
        return rets

    def obj(self, value, prefix: str = "f") -> str:
        """A name for `value` in the generated function's namespace."""
        key = id(value)
        if key not in self.objects:
            self.objects[key] = f"{prefix}{len(self.objects)}"
            self.namespace[self.objects[key]] = value
        return self.objects[key]

    def ref(self, a, names) -> str:
        if isinstance(a, Literal):
            if a.key not in self.literals:
                self.literals[a.key] = f"l{len(self.literals)}"
                self.namespace[self.literals[a.key]] = a.val
            return self.literals[a.key]
        return names[a]

    def node(self, node: Node, names, base: str, targets: Mapping[int, str], own: bool = False) -> None:
        """Emit `node` (a call, or a fusion's body inline); its outputs are named from `base`.
        `targets[k]` names the operand that output k is written into."""
        multi = node.prim.multiple_results
        outs = [f"{base}_{k}" if multi else base for k in range(len(node.outputs))]
        if node.prim is P.fusion_p:
            self.fusion(node, names, base, outs, targets)
        else:
            if isinstance(node.prim.ufunc, str):
                _scipy_special()  # imported now, with the compile, not by the first call
            fn = impl_rules[node.prim]
            fn = self.obj(functools.partial(fn, **node.params) if node.params else fn)
            operands = ", ".join(self.ref(a, names) for a in node.inputs)
            call = f"{fn}({operands})"
            if 0 in targets and not multi:
                ufunc = inplace_ufunc(node)
                call = (f"_inplace({self.obj(ufunc, 'u')}, {targets[0]}, {operands})" if ufunc
                        else f"_copy_into({targets[0]}, {call})")
            if own:
                call = f"_array({call})"
            target = ", ".join(outs) + ("," if multi and len(outs) == 1 else "")
            if multi and not outs:
                target = "_"
            self.lines.append(f"    {target} = {call}  # {node.prim.name} {node.loc or ''}".rstrip())
        names.update(zip(node.outputs, outs))
        if self.check and outs:
            result = f"({', '.join(outs)}{',' if len(outs) == 1 else ''})" if multi else outs[0]
            self.lines.append(f"    _check({self.obj(node, 'n')}, {result})")

    def fusion(self, node: Node, names, base: str, outs: list[str], targets: Mapping[int, str]) -> None:
        """A fusion's body inline, its values named `<base>b<t>`; an output written in place takes the
        operand as `out=` of the body node making it when nothing later in the body reads the operand,
        else is copied into it after the body. Outputs that alias an operand or are views of another body
        value are copied (the plan counts each output as its own buffer, and may write the other in place)."""
        body: Graph = node.params["body"]
        self.lines.append(f"    # fusion {node.params['kind']} {node.loc or ''}".rstrip())
        inner = {bv: self.ref(a, names) for bv, a in zip(body.inputs, node.inputs)}
        aliases = _body_aliases(body)
        writes, after = {}, {}
        for k, operand in targets.items():
            t = _writer(body, k, {bv for bv, name in inner.items() if name == operand}, aliases)
            if t is not None and t not in writes:
                writes[t] = operand
            else:
                after[k] = operand
        last = last_uses(body)
        keep = set(body.inputs)
        for t, bn in enumerate(body.nodes):
            self.node(bn, inner, f"{base}b{t}", {0: writes[t]} if t in writes else {})
            dead = [inner[v] for v in (*bn.inputs, *bn.outputs)
                    if isinstance(v, Var) and v not in keep and last[v] == t]
            if dead:
                self.lines.append(f"    del {', '.join(dict.fromkeys(dead))}")
        seen = set()
        views = _body_views(body)
        for k, (bo, name) in enumerate(zip(body.outputs, outs)):
            if k in after:
                continue
            value = self.ref(bo, inner)
            # a view of an operand, or of another body value (a later node may write that one in place)
            copy = isinstance(bo, Literal) or bo in seen or aliases.get(bo) is not None or bo in views
            seen.add(bo)
            self.lines.append(f"    {name} = {'_array(' + value + ')' if copy else value}")
        for k, operand in after.items():
            self.lines.append(f"    {outs[k]} = _copy_into({operand}, {self.ref(body.outputs[k], inner)})")


def _may_view(node: Node, v: Var) -> bool:
    """Whether `node`'s output `v` may be a view of another array (possibly read-only): a view prim's,
    or a fusion's whose body makes it with one (outputs aliasing an operand are already copies)."""
    if node.prim is not P.fusion_p:
        return node.prim.may_view
    body = node.params["body"]
    out = body.outputs[node.outputs.index(v)]
    inner = next((n for n in body.nodes if out in n.outputs), None)
    return inner is not None and _may_view(inner, out)


def _body_aliases(body: Graph) -> dict[Var, Var]:
    """body value -> the body input it may share memory with (through view prims), for those that do."""
    alias = {v: v for v in body.inputs}
    for bn in body.nodes:
        if bn.prim.may_view and bn.inputs and bn.inputs[0] in alias:
            alias[bn.outputs[0]] = alias[bn.inputs[0]]
    return alias


def _body_views(body: Graph) -> set[Var]:
    """Body values that may be views of another body value (made by view prims from a computed value)."""
    views: set[Var] = set()
    for bn in body.nodes:
        if bn.prim.may_view and bn.inputs and isinstance(bn.inputs[0], Var):
            views.add(bn.outputs[0])
    return views


def _writer(body: Graph, k: int, bound: set[Var], aliases) -> int | None:
    """The index of the body node that may write fusion output k into its operand (the body inputs
    `bound` to it) with `out=`: the node making it, a ufunc, when no later body node and no other
    output reads that operand."""
    bo = body.outputs[k]
    t = next((t for t, bn in enumerate(body.nodes) if bo in bn.outputs), None)
    if t is None or inplace_ufunc(body.nodes[t]) is None:
        return None
    reads_later = any(aliases.get(a) in bound for bn in body.nodes[t + 1:] for a in bn.inputs if isinstance(a, Var))
    other_outputs = any(aliases.get(o) in bound for i, o in enumerate(body.outputs) if i != k and isinstance(o, Var))
    return None if reads_later or other_outputs else t


def _check(node, res):
    results = res if node.prim.multiple_results else (res,)
    for v, r in zip(node.outputs, results):
        r = np.asarray(r)
        if r.shape != v.aval.shape or r.dtype != v.aval.dtype:
            raise AssertionError(f"numpy rule of {node.prim.name} (at {node.loc}) returned "
                                 f"{r.dtype}{list(r.shape)}, its aval is {v.aval.str_short()}")


class NumpyBackend:
    name = "numpy"

    def compile(self, graph: Graph, plan: Plan) -> NumpyExecutable:
        return NumpyExecutable(graph, plan)


BACKEND = NumpyBackend()
