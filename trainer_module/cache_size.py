"""Whether a split's parsed examples fit in memory, estimated without reading the split.

The estimate decompresses the start of one file (a few MB at most), counts the records in it,
and scales by the compressed size of all files (one stat each, on local disk or GCS). Cached
examples hold 4 bytes per model input, label and weight: the dtypes `model_inputs` casts to.
"""

import dataclasses
import os
import struct
import zlib
from collections.abc import Mapping

import tensorflow as tf

from trainer_module.config import DataConfig
from trainer_module.data import list_files
from trainer_module.dataset_spec import DatasetSpec

# Compressed bytes read from the first file to count records per compressed byte.
SAMPLE_BYTES = 4 << 20
# A TFRecord frame: length (8), length CRC (4), the record, record CRC (4).
_FRAME = 16
# The cgroup (v2, then v1) files a container's memory limit is read from.
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def host_memory_bytes() -> int:
    """Physical RAM, or the container's memory limit when that is smaller."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_LIMITS:
        try:
            with open(path, encoding="ascii") as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdigit():
            total = min(total, int(raw))
    return total


def estimated_records(files: list[str]) -> int:
    """Records in GZIP TFRecord files, from the record density of the first file's start."""
    sizes = [tf.io.gfile.stat(f).length for f in files]
    with tf.io.gfile.GFile(files[0], "rb") as f:
        compressed = f.read(SAMPLE_BYTES)
    raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(compressed)
    records, offset = 0, 0
    while offset + 12 <= len(raw):
        (length,) = struct.unpack_from("<Q", raw, offset)
        if offset + _FRAME + length > len(raw):
            break
        offset += _FRAME + length
        records += 1
    if len(compressed) >= sizes[0] or not compressed:  # the whole first file was read
        per_byte_rest = records / max(sizes[0], 1)
        return records + round(per_byte_rest * sum(sizes[1:]))
    return round(records / len(compressed) * sum(sizes))


def bytes_per_example(spec: DatasetSpec) -> int:
    """Cached bytes of one example: 4 per model input, the label and (when rows without a label
    are dropped) the weight."""
    return 4 * (len(spec.model_outputs()) + 1 + (spec.missing_labels == "drop"))


@dataclasses.dataclass(frozen=True)
class CacheDecision:
    """Per split: its estimated in-memory bytes, and whether it is cached."""

    mode: str
    budget: int
    estimated: Mapping[str, int]
    cached: Mapping[str, bool]

    def describe(self) -> str:
        parts = [f"{split} ~{self.estimated[split] / 1e6:,.1f} MB "
                 f"{'cached in memory' if self.cached[split] else 'streamed from files'}"
                 for split in self.estimated]
        reason = {"memory": "cache='memory'", "none": "cache='none'"}.get(
            self.mode, f"cache='auto', budget {self.budget / 1e6:,.0f} MB of host RAM")
        return f"{', '.join(parts)} ({reason})"


def decide(settings: DataConfig, spec: DatasetSpec,
           splits: Mapping[str, str | list[str]]) -> CacheDecision:
    """Which splits to cache: all ('memory'), none ('none'), or ('auto') each in turn while
    their estimated sizes together fit in cache_memory_fraction of host RAM."""
    per_example = bytes_per_example(spec)
    estimated = {name: estimated_records(list_files(files)) * per_example
                 for name, files in splits.items()}
    budget = int(host_memory_bytes() * settings.cache_memory_fraction)
    if settings.cache != "auto":
        return CacheDecision(settings.cache, budget, estimated,
                             {name: settings.cache == "memory" for name in splits})
    cached, used = {}, 0
    for name, size in estimated.items():
        cached[name] = used + size <= budget
        used += size if cached[name] else 0
    return CacheDecision(settings.cache, budget, estimated, cached)
