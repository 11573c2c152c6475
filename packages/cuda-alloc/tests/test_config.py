"""FLAMBEAU_CUDA_ALLOC_CONF parsing and its errors."""

from __future__ import annotations

import pytest

from flambeau.cuda_alloc import CachingAllocator, SimulatedDevice, parse_config
from flambeau.cuda_alloc._config import AllocatorConfig

MiB = 1 << 20


def test_defaults():
    for text in (None, "", "  "):
        assert parse_config(text) == AllocatorConfig()


def test_all_settings():
    config = parse_config(
        "max_split_size_mb:128, garbage_collection_threshold:0.8,roundup_power2_divisions:4"
    )
    assert config.max_split_size == 128 * MiB
    assert config.max_split_size_mb == 128
    assert config.garbage_collection_threshold == 0.8
    assert config.roundup_power2_divisions == 4


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("max_split_size_mb:abc", r"max_split_size_mb: expected an integer number of MiB.*got 'abc'"),
        ("max_split_size_mb:10", r"max_split_size_mb: expected .* at least 20, got '10'"),
        ("garbage_collection_threshold:1.0", r"garbage_collection_threshold: expected .*\(0, 1\), got '1.0'"),
        ("garbage_collection_threshold:nan", r"garbage_collection_threshold: expected"),
        ("garbage_collection_threshold:x", r"garbage_collection_threshold: expected .*got 'x'"),
        ("roundup_power2_divisions:3", r"roundup_power2_divisions: expected a power of two .*got '3'"),
        ("roundup_power2_divisions:0", r"roundup_power2_divisions: expected a power of two"),
        ("max_split_size_mb", r"expected 'key:value' pairs .*got 'max_split_size_mb'"),
        ("max_split_size_mb:", r"expected 'key:value' pairs"),
        ("expandable_segments:True", r"unknown setting 'expandable_segments': expected one of"),
        ("max_split_size_mb:64,max_split_size_mb:32", r"max_split_size_mb: expected the setting once"),
    ],
)
def test_malformed_settings_name_setting_expected_and_given(text, match):
    with pytest.raises(ValueError, match=match) as info:
        parse_config(text)
    assert "FLAMBEAU_CUDA_ALLOC_CONF" in str(info.value)


def test_allocator_reads_the_environment_at_start(monkeypatch):
    monkeypatch.setenv("FLAMBEAU_CUDA_ALLOC_CONF", "max_split_size_mb:64")
    alloc = CachingAllocator(SimulatedDevice())
    assert alloc.config.max_split_size == 64 * MiB
    monkeypatch.setenv("FLAMBEAU_CUDA_ALLOC_CONF", "max_split_size_mb:6")
    with pytest.raises(ValueError, match="max_split_size_mb"):
        CachingAllocator(SimulatedDevice())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_split_size": 5}, "max_split_size: expected None or an int of at least 20 MiB"),
        ({"garbage_collection_threshold": 0}, "garbage_collection_threshold"),
        ({"roundup_power2_divisions": 6}, "roundup_power2_divisions"),
    ],
)
def test_config_object_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AllocatorConfig(**kwargs)
