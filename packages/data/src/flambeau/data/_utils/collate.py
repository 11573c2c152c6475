"""torch's ``torch.utils.data._utils.collate``: flambeau's collation (:mod:`flambeau.data._collate`), the same
objects, so that a program registering a type in ``default_collate_fn_map`` there changes the DataLoader's."""

from flambeau.data._collate import (  # noqa: F401
    collate,
    collate_float_fn,
    collate_int_fn,
    collate_numpy_array_fn,
    collate_numpy_scalar_fn,
    collate_str_fn,
    collate_tensor_fn,
    default_collate,
    default_collate_fn_map,
    default_convert,
)

__all__ = ["collate", "default_collate", "default_collate_fn_map", "default_convert"]
