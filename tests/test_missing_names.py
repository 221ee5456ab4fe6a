"""A missing name anywhere in ember.* raises an AttributeError that says whether JAX has it and what to
use instead: every public name of the JAX modules Ember mirrors is either in Ember or explained."""

from __future__ import annotations

import importlib
import re
import types

import pytest

import ember
from ember.jax_names import HINTS, JAX_NAMES, JAX_VERSION

try:
    import jax
except ImportError:  # the comparisons with the installed JAX skip; the recorded table is still checked
    jax = None
needs_jax = pytest.mark.skipif(jax is None, reason="compares with the installed JAX")

# Ember module -> the JAX module it mirrors
MIRRORS = {
    "ember.numpy": "jax.numpy", "ember.numpy.linalg": "jax.numpy.linalg", "ember.lax": "jax.lax",
    "ember.nn": "jax.nn", "ember.tree_util": "jax.tree_util", "ember.tree": "jax.tree", "ember.scipy": "jax.scipy",
    "ember.scipy.special": "jax.scipy.special", "ember.scipy.stats": "jax.scipy.stats", "ember.random": "jax.random",
    "ember.scipy.linalg": "jax.scipy.linalg",
    "ember.lax.linalg": "jax.lax.linalg",
}


def _missing_message(module, name: str) -> str | None:
    """None when `module` has `name`, else its AttributeError's message (any other exception fails)."""
    try:
        getattr(module, name)
    except AttributeError as e:
        return str(e)
    return None


@needs_jax
@pytest.mark.parametrize("ember_name, jax_name", list(MIRRORS.items()))
def test_every_jax_name_is_in_ember_or_explained(ember_name, jax_name):
    mine, theirs = importlib.import_module(ember_name), importlib.import_module(jax_name)
    unexplained = []
    for name in (n for n in dir(theirs) if not n.startswith("_")):
        msg = _missing_message(mine, name)
        if msg is not None and not (f"{jax_name}.{name}" in msg and "not implemented in Ember" in msg):
            unexplained.append((name, msg))
    assert not unexplained


@needs_jax
def test_the_recorded_jax_names_are_the_installed_jaxs():
    if jax.__version__ != JAX_VERSION:
        pytest.skip(f"ember/jax_names.py records JAX {JAX_VERSION}; JAX {jax.__version__} is installed")
    for module in JAX_NAMES:
        importlib.import_module(module)
    for module, names in JAX_NAMES.items():
        mod = importlib.import_module(module)
        found = {n for n in dir(mod) if not n.startswith("_")}
        # a submodule another test imported (jax.extend) becomes an attribute of its package
        extra = {n for n in found - names if isinstance(getattr(mod, n), types.ModuleType)}
        assert names == found - extra, module


@pytest.mark.parametrize("ember_name", list(MIRRORS))
def test_each_module_says_what_jax_has_and_what_it_does_not(ember_name):
    module = importlib.import_module(ember_name)
    jax_name = MIRRORS[ember_name]
    lacking = sorted(n for n in JAX_NAMES[jax_name] if not hasattr(module, n))
    for name in lacking[:3]:  # (a module may word its own table's names itself, as ember.nn does)
        msg = _missing_message(module, name)
        assert f"{jax_name}.{name}" in msg and "not implemented in Ember yet" in msg
    msg = _missing_message(module, "no_such_name_anywhere")
    assert msg.startswith(f"module '{ember_name}' has no attribute 'no_such_name_anywhere' (nor has {jax_name}")
    assert _missing_message(module, "__wrapped__") == f"module '{ember_name}' has no attribute '__wrapped__'"


@pytest.mark.parametrize("module, name, says", [
    (ember.numpy, "count_nonzero", ["JAX 0.10.2 has jax.numpy.count_nonzero", "ember.numpy.sum",
                                    "numpy.count_nonzero works"]),
    (ember.numpy, "asmatrix", ["jax.numpy has no asmatrix either", "numpy.asmatrix works"]),
    (ember.numpy, "sums", ["no attribute 'sums' (nor has jax.numpy or numpy)",
                           "closest names it has: ember.numpy.sum"]),
    (ember.lax, "associative_scan", ["jax.lax.associative_scan", "ember.lax.scan"]),
    (ember.lax, "lgama", ["no attribute 'lgama' (nor has jax.lax)", "closest names it has: ember.lax.lgamma"]),
    (ember.scipy.special, "erfcx", ["jax.scipy.special.erfcx", "ember.scipy.special.erfc",
                                    "scipy.special.erfcx works"]),
    (ember.scipy, "signal", ["jax.scipy.signal", "only ember.scipy.special"]),
    (ember.tree, "mapp", ["no attribute 'mapp' (nor has jax.tree)", "closest names it has: ember.tree.map"]),
])
def test_messages_say_what_to_use(module, name, says):
    msg = _missing_message(module, name)
    for text in says:
        assert text in msg


def test_hints_name_jax_names_and_point_at_ember_names_that_exist():
    for ember_name, hints in HINTS.items():
        jax_names = JAX_NAMES["jax" + ember_name[len("ember"):]]
        for name, text in hints.items():
            assert name in jax_names, (ember_name, name)
            for ref in re.findall(r"ember(?:\.\w+)+", text):
                obj = ember
                for part in ref.split(".")[1:]:
                    obj = getattr(obj, part)  # raises AttributeError for a hint pointing nowhere


def test_hints_are_only_for_names_ember_lacks():
    """A name Ember has must not keep a hint saying what to use instead of it (jax_names' tables and the
    modules' own)."""
    tables = {**HINTS, "ember.nn": ember.nn._HINTS, "ember.random": ember.random._HINTS}
    for ember_name, hints in tables.items():
        module = importlib.import_module(ember_name)
        assert not [name for name in hints if _missing_message(module, name) is None], ember_name


def test_top_level_jax_only_names_are_jax_names_ember_lacks():
    for name in ember._JAX_ONLY:
        assert name in JAX_NAMES["jax"], name
        msg = _missing_message(ember, name)
        assert msg is None or f"ember does not implement jax.{name} yet; " in msg
