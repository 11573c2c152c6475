"""nn modules: rnn. Being written."""

__all__: list[str] = []
