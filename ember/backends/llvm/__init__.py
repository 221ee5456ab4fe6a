"""The LLVM CPU backend: the optimized graph and its memory plan become one native function.

Modules: `types` (dtypes as IR types, element addresses), `mathlib` (inline polynomial math),
`scalar` (the scalar op table: one entry per elementwise primitive), `loops` (a kernel description's
loops as IR), `dot` (contractions: SciPy's BLAS or generated loops), `indexing` (argmax/argmin and
scatter steps), `jit` (optimization, object code, ORC LLJIT), `cache` (object code on disk),
`graph` (the whole graph as one entry function), `executable` (the Python call path), `backend`.
"""
