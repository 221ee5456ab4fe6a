"""Detect the peer frameworks (JAX on the CPU, PyTorch); an absent one is reported as absent, never faked."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType

PEERS = ("jax", "torch")

INSTALL_HINT = {
    "jax": "pip install jax",
    "torch": "pip install torch==2.13.0",
}


@dataclass
class Peer:
    """A peer framework: its module when usable, else why not (shown in the table instead of timings)."""

    name: str
    module: ModuleType | None
    version: str | None
    status: str | None                        # None when usable

    @property
    def available(self) -> bool:
        """Whether the module imported."""
        return self.module is not None


def _load_jax() -> ModuleType:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")   # the table compares CPU implementations
    jax = importlib.import_module("jax")
    # The float64 workloads (eam) need x64; float32 workloads pass float32 arrays and keep float32 (weak
    # Python scalars), which the result check verifies dtype by dtype.
    jax.config.update("jax_enable_x64", True)
    return jax


def _load_torch() -> ModuleType:
    torch = importlib.import_module("torch")
    importlib.import_module("torch.func")
    return torch


_LOADERS = {"jax": _load_jax, "torch": _load_torch}


def detect(enabled: set[str]) -> dict[str, Peer]:
    """Import each peer that is enabled; record absent and disabled ones with the reason."""
    peers = {}
    for name in PEERS:
        if name not in enabled:
            peers[name] = Peer(name, None, None, "disabled (--no-peers/--peers)")
            continue
        try:
            module = _LOADERS[name]()
        except ImportError as e:
            peers[name] = Peer(name, None, None, f"absent: not installed ({INSTALL_HINT[name]}; {e})")
            continue
        peers[name] = Peer(name, module, str(module.__version__), None)
    return peers
