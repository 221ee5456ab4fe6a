"""Runtime options, named after JAX's: `ember.config.update("ember_debug_nans", True)`, read back with
`ember.config.read("ember_debug_nans")` or the attribute `ember.config.debug_nans`. Each option's
default comes from its environment variable (EMBER_DEBUG_NANS=1), read when ember is imported.

- ember_debug_nans: a compiled function whose output holds a NaN that its inputs did not is rerun
  node by node, and a FloatingPointError names the node that made the first NaN.
- ember_debug_infs: the same for infinities.
- ember_check_oracle: every compiled call is also run on the oracle (the graph before optimization,
  naive plan, numpy backend) and an AssertionError names the output that differs, an input that was
  written without being donated, or an output that aliases another or an input. The test suite turns
  it on, so every function it tests is a differential test of the optimizer. Slow: for debugging.
"""

from __future__ import annotations

import os

# option name -> (module attribute, environment variable)
_OPTIONS = {
    "ember_debug_nans": ("debug_nans", "EMBER_DEBUG_NANS"),
    "ember_debug_infs": ("debug_infs", "EMBER_DEBUG_INFS"),
    "ember_check_oracle": ("check_oracle", "EMBER_CHECK_ORACLE"),
}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"", "0", "false", "no", "off"}


def _env_flag(var: str) -> bool:
    raw = os.environ.get(var, "")
    text = raw.strip().lower()
    if text not in _TRUE | _FALSE:
        raise ValueError(f"{var}={raw!r} is not a boolean; set it to 1 or 0")
    return text in _TRUE


debug_nans: bool = _env_flag("EMBER_DEBUG_NANS")
debug_infs: bool = _env_flag("EMBER_DEBUG_INFS")
check_oracle: bool = _env_flag("EMBER_CHECK_ORACLE")


def _attr(name: str) -> str:
    if name not in _OPTIONS:
        raise AttributeError(f"ember has no config option {name!r}; the options are {sorted(_OPTIONS)}")
    return _OPTIONS[name][0]


def update(name: str, value: bool) -> None:
    """Set option `name` (e.g. "ember_debug_nans") to `value`."""
    attr = _attr(name)
    if not isinstance(value, (bool, int)):
        raise TypeError(f"config option {name} takes a bool, got {type(value).__name__}")
    globals()[attr] = bool(value)


def read(name: str) -> bool:
    """The current value of option `name`."""
    return globals()[_attr(name)]
