"""Loss operators (nll_loss, cross_entropy, ...). Being written."""

__all__: list[str] = []
