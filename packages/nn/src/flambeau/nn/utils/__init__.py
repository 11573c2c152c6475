"""nn.utils. Being written."""
