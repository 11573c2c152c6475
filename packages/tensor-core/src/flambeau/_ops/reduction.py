"""Reductions: sum, mean, prod, max/min, argmax/argmin, var/std, logsumexp, norm, all/any, cumsum ..."""
