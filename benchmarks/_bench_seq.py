"""ops.py benchmarks of the seq operators. Being written."""


def run(r, torch) -> None:
    """Add this family's comparisons to the report ``r`` (``torch`` is None when not installed)."""
