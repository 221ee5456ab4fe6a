"""JAX's `jax.ad_checkpoint` names: checkpoint (remat), its policies and checkpoint_name."""

from ember.api.remat import checkpoint, checkpoint_name, checkpoint_policies, remat

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name"]
