"""Normalisation operators (batch_norm, layer_norm, group_norm). Being written."""

__all__: list[str] = []
