"""Shape and view operators: view, reshape, permute, transpose, expand, squeeze, cat, stack, split ..."""
