"""Linear algebra: matmul and its family (mm, bmm, addmm, baddbmm, dot, outer, einsum)."""
