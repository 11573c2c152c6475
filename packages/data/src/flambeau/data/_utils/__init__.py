"""torch's ``torch.utils.data._utils`` path: code that extends the default collation imports it from there
(``from torch.utils.data._utils.collate import default_collate_fn_map``)."""

from flambeau.data._utils import collate  # noqa: F401
