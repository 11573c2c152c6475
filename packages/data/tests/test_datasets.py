"""flambeau.data.datasets: MNIST, FashionMNIST, CIFAR10, ArrayFolder and Digits, from tiny files
written into tmp_path (and the bundled digits)."""

from __future__ import annotations

import gzip
import os
import pickle

import numpy as np
import pytest

import flambeau as fl
from flambeau.data import DataLoader
from flambeau.data.datasets import CIFAR10, MNIST, ArrayFolder, Digits, FashionMNIST, read_idx


def write_idx(path, arr, gz=False):
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(">i2"): 0x0B, np.dtype(">i4"): 0x0C,
             np.dtype(">f4"): 0x0D, np.dtype(">f8"): 0x0E}
    header = bytes([0, 0, codes[arr.dtype], arr.ndim]) + np.asarray(arr.shape, ">u4").tobytes()
    data = header + arr.tobytes()
    with (gzip.open if gz else open)(str(path) + (".gz" if gz else ""), "wb") as f:
        f.write(data)


def make_mnist(folder, n_train=5, n_test=3, gz=False, seed=0):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n).astype(np.uint8)
        write_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte"), images, gz)
        write_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), labels, gz)
        out[prefix] = (images, labels)
    return out


@pytest.mark.parametrize("layout", ["root", "raw", "class_raw"])
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("cls", [MNIST, FashionMNIST])
def test_mnist_layouts_and_samples(tmp_path, layout, gz, cls):
    folder = {"root": tmp_path, "raw": tmp_path / "raw", "class_raw": tmp_path / cls.__name__ / "raw"}[layout]
    truth = make_mnist(folder, gz=gz)
    train, test = cls(tmp_path), cls(tmp_path, train=False)
    assert len(train) == 5 and len(test) == 3 and len(cls.classes) == 10
    img, label = train[2]
    assert img.shape == (1, 28, 28) and img.dtype is fl.float32 and isinstance(label, int)
    np.testing.assert_allclose(img.numpy()[0], truth["train"][0][2] / 255.0, rtol=1e-6)
    assert label == truth["train"][1][2]
    assert test.targets.tolist() == truth["t10k"][1].tolist() and test.data.shape == (3, 28, 28)


def test_mnist_transforms_and_loader(tmp_path):
    make_mnist(tmp_path, n_train=6)
    ds = MNIST(tmp_path, transform=lambda x: x * 2, target_transform=lambda y: y + 100)
    img, label = ds[0]
    assert float(img.max()) <= 2.0 and label >= 100
    x, y = next(iter(DataLoader(ds, batch_size=4)))
    assert x.shape == (4, 1, 28, 28) and y.dtype is fl.int64


def test_mnist_missing_and_corrupt_files(tmp_path):
    with pytest.raises(RuntimeError, match=r"train-images-idx3-ubyte\[\.gz\] not found"):
        MNIST(tmp_path)
    make_mnist(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x09abc")
    with pytest.raises(ValueError, match="IDX header announces shape"):
        MNIST(tmp_path)
    (tmp_path / "bad").write_bytes(b"PK\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(tmp_path / "bad")


def test_read_idx_dtypes(tmp_path):
    for arr in (np.arange(6, dtype=">i4").reshape(2, 3), np.linspace(0, 1, 4).astype(">f8"),
                np.arange(-3, 3, dtype=np.int8)):
        write_idx(tmp_path / "a", arr)
        out = read_idx(tmp_path / "a")
        assert out.dtype.isnative and np.array_equal(out, arr) and out.shape == arr.shape


def make_cifar(root, n=4, seed=0):
    folder = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(folder)
    rng = np.random.default_rng(seed)
    truth = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, n).tolist()
        with open(os.path.join(folder, name), "wb") as f:  # as the original: bytes keys, protocol 2
            pickle.dump({b"batch_label": b"x", b"labels": labels, b"data": data,
                         b"filenames": [b"f.png"] * n}, f, protocol=2)
        truth[name] = (data, labels)
    with open(os.path.join(folder, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": [f"class{i}" for i in range(10)], "num_vis": 3072}, f)
    return truth


def test_cifar10(tmp_path):
    truth = make_cifar(tmp_path)
    train, test = CIFAR10(tmp_path), CIFAR10(tmp_path, train=False)
    assert len(train) == 20 and len(test) == 4 and train.classes[3] == "class3"
    img, label = train[5]  # second sample of data_batch_2
    assert img.shape == (3, 32, 32) and img.dtype is fl.float32
    expected = truth["data_batch_2"][0][1].reshape(3, 32, 32) / 255.0
    np.testing.assert_allclose(img.numpy(), expected, rtol=1e-6)
    assert label == truth["data_batch_2"][1][1]
    assert test.targets.tolist() == truth["test_batch"][1]
    assert CIFAR10(tmp_path / "cifar-10-batches-py", train=False)[0][1] == truth["test_batch"][1][0]
    with pytest.raises(RuntimeError, match="not found"):
        CIFAR10(tmp_path / "nothing")


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_cifar10_refuses_arbitrary_code(tmp_path):
    make_cifar(tmp_path)
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as f:
        pickle.dump({"data": np.zeros((1, 3072), np.uint8), "labels": [Evil()]}, f)
    with pytest.raises(pickle.UnpicklingError, match="refusing to load posix.system"):
        CIFAR10(tmp_path, train=False)


def test_array_folder(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {}
    for c in ("dog", "cat"):
        os.makedirs(tmp_path / c / "sub")
        for i in range(3):
            a = rng.standard_normal((2, 4)).astype(np.float32)
            np.save(tmp_path / c / f"{i}.npy", a)
            arrays[(c, i)] = a
        np.save(tmp_path / c / "sub" / "deep.npy", np.zeros((2, 4), np.float32))
        (tmp_path / c / "notes.txt").write_text("ignored")
    ds = ArrayFolder(tmp_path, transform=lambda t: t + 1)
    assert ds.classes == ["cat", "dog"] and ds.class_to_idx == {"cat": 0, "dog": 1}
    assert len(ds) == 8 and ds.targets == [0] * 4 + [1] * 4
    x, y = ds[0]
    assert y == 0 and np.allclose(x.numpy(), arrays[("cat", 0)] + 1)
    x, y = ds[7]
    assert y == 1 and np.allclose(x.numpy(), 1.0)  # dog/sub/deep.npy, after the files at the top level
    assert next(iter(DataLoader(ds, batch_size=8)))[0].shape == (8, 2, 4)
    np.save(tmp_path / "cat" / "obj.npy", np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        ArrayFolder(tmp_path)[3]  # cat/obj.npy
    with pytest.raises(FileNotFoundError, match="no class folders"):
        ArrayFolder(tmp_path / "dog" / "sub")


def test_digits_matches_scikit_learn():
    sk = pytest.importorskip("sklearn.datasets").load_digits()
    full = Digits(split="all")
    assert len(full) == 1797 and len(Digits()) == 1437 and len(Digits(train=False)) == 360
    assert len(Digits(split="test")) == 360 and Digits(train=False, split="train").split == "train"
    images = np.stack([full[i][0].numpy() for i in range(len(full))])
    assert images.shape == (1797, 1, 8, 8) and images.dtype == np.float32
    assert images.min() == 0.0 and images.max() == 1.0
    np.testing.assert_allclose(images[:, 0], sk.images / 16.0, rtol=1e-6)
    assert full.targets.tolist() == sk.target.tolist()
    test = Digits(train=False, transform=lambda t: t.flatten(), target_transform=str)
    x, y = test[0]
    assert x.shape == (64,) and y == str(sk.target[1437])
    with pytest.raises(ValueError, match="split must be 'train', 'test' or 'all'"):
        Digits(split="val")
