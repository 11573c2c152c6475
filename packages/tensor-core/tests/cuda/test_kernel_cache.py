"""Two processes saving kernels of one function to numba's on-disk cache at once (Note [Cache entries named by
their key] in flambeau.cuda._numba_compat): an index entry may be lost, never pointed at another's kernel."""

import pytest

caching = pytest.importorskip("numba.cuda.core.caching")

from flambeau.cuda._numba_compat import _keyed, keyed_cache_entries  # noqa: E402


def _writers(tmp_path, cls):
    return [cls(str(tmp_path), "nary-954.py311", "stamp") for _ in range(2)]


def _race(first, second, key_first, key_second):
    """``second`` reads the index before ``first`` writes it, then saves whole while ``first`` is writing its
    index: the interleaving of two processes that lets numba's numbered data files cross."""
    read_before_first_wrote = second._load_index()
    second._load_index = lambda: dict(read_before_first_wrote)
    real_save_index = first._save_index

    def save_index(overloads):
        real_save_index(overloads)
        second.save(key_second, b"kernel of " + key_second.encode())

    first._save_index = save_index
    first.save(key_first, b"kernel of " + key_first.encode())


@pytest.mark.parametrize("order", [("complex", "polar"), ("polar", "complex")])
def test_racing_saves_never_map_a_key_to_another_kernel(tmp_path, order):
    first, second = _writers(tmp_path, _keyed(caching.IndexDataCacheFile))
    _race(first, second, *order)
    reader = caching.IndexDataCacheFile(str(tmp_path), "nary-954.py311", "stamp")
    loaded = {key: reader.load(key) for key in order}
    for key, data in loaded.items():
        assert data in (None, b"kernel of " + key.encode()), (key, data)
    assert loaded[order[1]] == b"kernel of " + order[1].encode()  # the last index written holds its entry


def test_numbas_own_numbering_crosses_kernels_in_that_race(tmp_path):
    """The failure the keyed names prevent (if numba-cuda changes its scheme, this test says so)."""
    first, second = _writers(tmp_path, caching.IndexDataCacheFile)
    _race(first, second, "complex", "polar")
    reader = caching.IndexDataCacheFile(str(tmp_path), "nary-954.py311", "stamp")
    assert reader.load("polar") == b"kernel of complex"


def test_flambeau_kernels_get_keyed_cache_files():
    from numba import cuda

    from flambeau.cuda import is_simulator

    if is_simulator():
        pytest.skip("the simulator keeps no on-disk cache")

    def k(x):
        x[0] = 1

    dispatcher = keyed_cache_entries(cuda.jit(cache=True)(k))
    cache_file = dispatcher._cache._cache_file
    assert getattr(type(cache_file), "_flambeau_keyed", False)
    assert cache_file._index_path.endswith(".keyed.nbi")  # not an index of numba's numbering
    assert keyed_cache_entries(dispatcher) is dispatcher  # twice: the class is not wrapped again
    assert type(cache_file).__mro__[1] is caching.IndexDataCacheFile
    assert cache_file._index_path.endswith(".keyed.nbi") and not cache_file._index_path.endswith(".keyed.keyed.nbi")
