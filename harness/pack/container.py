"""The packed model file: header, metadata tables and 4096-aligned per-layer regions (byte layout: docs/format.md).

The writer turns a quantized-model artifact (docs/quantized-artifact.md) into one file; the reader validates every
field before trusting it, so a corrupt or truncated file raises PackError naming the problem.
"""
from __future__ import annotations

import json
import math
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.artifact import (LINEAR_FIELDS, TENSORS, Artifact, ArtifactError, QuantLinear, quantized_linears,
                              read_manifest)
from harness.cache import atomic_file
from harness.models.arch import PACKED_INT_FIELDS
from harness.pack.base import PackError, encode_bits, get_layout, layout_of_dtype
from harness.safetensors_io import SafetensorsError, SafetensorsReader, TensorDict, byte_view, return_freed_memory

MAGIC = b"EFPK\r\n\x1a\n"
VERSION = 4  # 2: the U32 dtype and model.embed_tokens.row_crc32; 3: P.out_step and P.act_bits; 4: a quantized
#              lm_head.weight (the LM head inside the bit budget) (docs/format.md)
READABLE_VERSIONS = (1, 2, 3, 4)  # 1 and 2 still read: their linears have float outputs and 8-bit activations
NUMERICS_FIELDS = ("act_bits", "out_step")  # a linear's NPU numerics, version 3 (docs/format.md)
HEADER = struct.Struct("<8sIIQQQIIIIII")  # 64 bytes, see docs/format.md "Header"
CONFIG = struct.Struct("<8I2f6I")  # 64 bytes: model config + sizes of the string table and the JSON
REGION = struct.Struct("<IIQQII")  # 32 bytes
TENSOR = struct.Struct("<IIBBHI4IQQIIQ")  # 64 bytes
ALIGNMENT = 4096  # regions start and end here, so a layer can be read with O_DIRECT
TENSOR_ALIGN = 64  # payloads start here inside a region
assert HEADER.size == CONFIG.size == TENSOR.size == 64 and REGION.size == 32

F32, F16, I8, U8, U32 = 1, 2, 3, 4, 5
RAW_DTYPES = {F32: np.float32, F16: np.float16, I8: np.int8, U8: np.uint8, U32: np.uint32}
DTYPE_OF_NUMPY = {np.dtype(v): k for k, v in RAW_DTYPES.items()}
REGION_EMBEDDING, REGION_LAYER, REGION_FINAL = 0, 1, 2

# order of a layer's tensors on disk: the order the forward pass needs them
MODULE_ORDER = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
_LAYER_NAME = re.compile(r"model\.layers\.(\d+)\.(.+)")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: int
    shape: tuple[int, ...]
    region: int
    offset: int  # absolute file offset of the payload
    size: int  # payload bytes
    crc32: int


@dataclass(frozen=True)
class RegionInfo:
    kind: int  # REGION_EMBEDDING, REGION_LAYER or REGION_FINAL
    layer: int
    offset: int
    size: int
    first_tensor: int
    n_tensors: int


# --- writing --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One tensor to write: its payload is made when the writer reaches it, in pieces written and dropped in turn."""
    name: str
    dtype: int
    shape: tuple[int, ...]
    size: int  # payload bytes, known before the payload is made
    payload: Callable[[], Iterable[bytes | memoryview]]


def pack_artifact(artifact: Artifact | str | os.PathLike, path: str | os.PathLike, layout: str = "weightlet") -> Path:
    """Write `artifact` (in memory, or its directory: then read one tensor at a time) as one packed file with its
    quantized linears in `layout`; atomic (temp file + rename). Memory holds one layer's tensors at most."""
    return_freed_memory()
    manifest, tensors = _artifact_tensors(artifact)
    if not manifest.get("runtime_compatible", True):
        raise PackError(f"artifact of quantizer {manifest.get('quantizer', {}).get('name')!r} needs what the "
                        f"runtime lacks ({manifest.get('runtime_incompatible_reason')}); it cannot be packed")
    lay = get_layout(layout)
    names = tensors.names()
    linears = quantized_linears(names)
    stored = set(names)
    entries = []
    for name in linears:
        bits = tensors.read(f"{name}.bits")
        channels, dim = tensors.shape(f"{name}.codes")

        def weight(name=name, bits=bits):  # the codes, checked against their widths, in the layout
            q = QuantLinear(tensors.read(f"{name}.codes"), bits, tensors.read(f"{name}.w_scale"),
                            tensors.read(f"{name}.in_scale"), None)
            q.validate(name)
            return [lay.encode(q.codes.numpy(), bits.numpy())]
        size = lay.payload_size(bits.numpy(), dim)
        entries.append(Entry(f"{name}.weight", lay.dtype, (channels, dim), size, weight))
        fields = ("w_scale", "in_scale", "act_scale") + (NUMERICS_FIELDS if VERSION >= 3 else ())
        entries += [_raw(tensors, f"{name}.{k}") for k in fields if f"{name}.{k}" in stored]
    parts = {f"{n}.{k}" for n in linears for k in LINEAR_FIELDS}
    if VERSION >= 4 and _head_in_budget(tensors, stored):  # version 4: the LM head as a quantized weight, its scales raw
        entries += [_packed_head(tensors, lay), _raw(tensors, f"{HEAD}.w_scale")]
        parts |= {f"{HEAD}.{k}" for k in ("codes", "bits", "w_scale")}
    entries += [_raw(tensors, name) for name in names if name not in parts]
    if EMBED_CODES in stored and VERSION >= 2:  # (a version 1 file, as tests write one, has no row CRCs)
        entries.append(_row_crcs(tensors, EMBED_CODES, EMBED_ROW_CRCS))
    provenance = {"format": "edgeflow-packed", "version": VERSION, "layout": lay.name,
                  "model": manifest.get("model"), "quantizer": manifest.get("quantizer")}
    return write_packed(path, manifest["model"]["config"], entries, provenance, lay.dtype)


HEAD = "lm_head"


def _head_in_budget(tensors, stored: set[str]) -> bool:
    """Whether the artifact's LM head is its own INT8 table with rows below 8 bits (quantizer.lm_head=budget); one at
    8 bits stays a raw table, as in every version."""
    return f"{HEAD}.codes" in stored and bool((tensors.read(f"{HEAD}.bits") < 8).any())


def _packed_head(tensors, lay) -> Entry:
    """`lm_head.weight` [V, H] in the layout, like a linear's weight: its widths, then its rows' data written in
    blocks of rows (the table is the largest tensor of a small model: never whole in memory)."""
    bits = tensors.read(f"{HEAD}.bits").numpy()
    rows, dim = tensors.shape(f"{HEAD}.codes")

    def payload():
        if lay.has_bits_section:
            yield encode_bits(bits)
        a = 0
        for block in _row_blocks(tensors, f"{HEAD}.codes", (rows, dim), rows * dim):
            codes = np.frombuffer(block, np.int8).reshape(-1, dim)
            b = a + len(codes)
            try:
                yield lay.encode_body(codes, bits[a:b])
            except PackError as e:
                raise PackError(f"{HEAD}.codes rows {a}..{b - 1}: {e}") from None
            a = b
    return Entry(f"{HEAD}.weight", lay.dtype, (rows, dim), lay.payload_size(bits, dim), payload)


def _artifact_tensors(artifact):
    """(manifest, tensors with names() / shape(name) / dtype(name) / read(name)) of an artifact or its directory."""
    if isinstance(artifact, Artifact):
        return artifact.manifest, TensorDict(artifact.tensors())
    directory = Path(artifact)
    manifest = read_manifest(directory)
    try:
        return manifest, SafetensorsReader(directory / TENSORS)
    except SafetensorsError as e:
        raise ArtifactError(str(e)) from None


def write_packed(path, config: dict, entries: list[Entry], provenance: dict, packing: int) -> Path:
    """Group entries into regions, lay them out from their sizes, write each payload as it is made (its CRC kept),
    then the header and tables in front."""
    regions = _group_by_region(entries)
    strings, name_offsets = bytearray(), {}
    for _, _, items in regions:
        for e in items:
            name_offsets[e.name] = len(strings)
            strings += e.name.encode()
    js = json.dumps(provenance, sort_keys=True).encode()
    n_tensors = sum(len(items) for *_, items in regions)
    meta_size = CONFIG.size + REGION.size * len(regions) + TENSOR.size * n_tensors + len(strings) + len(js)

    # lay out: regions from the first 4096 boundary after the metadata, payloads 64-aligned inside a region
    region_rows, placed = [], []
    cursor = _align(HEADER.size + meta_size, ALIGNMENT)
    for kind, layer, items in regions:
        start, pos = cursor, cursor
        first = len(placed)
        for e in items:
            pos = _align(pos, TENSOR_ALIGN)
            placed.append((e, pos, len(region_rows)))
            pos += e.size
        cursor = _align(pos, ALIGNMENT)
        region_rows.append(REGION.pack(kind, layer, start, cursor - start, first, len(items)))
    file_size = cursor

    flags = 1 if config.get("tie_word_embeddings", False) else 0
    cfg = CONFIG.pack(*(int(config.get(k) or 0) for k in PACKED_INT_FIELDS), float(config.get("rms_norm_eps", 1e-5)),
                      float(config.get("rope_theta", 10000.0)), flags, len(strings), len(js), 0, 0, 0)
    with atomic_file(Path(path)) as tmp, open(tmp, "wb") as f:
        tensor_rows = []
        for e, pos, region in placed:
            f.seek(pos)
            written = crc = 0
            for piece in e.payload():
                f.write(piece)
                crc = zlib.crc32(piece, crc)
                written += len(piece)
            if written != e.size:
                raise PackError(f"{e.name}: payload is {written} bytes, its layout said {e.size}")
            dims = list(e.shape) + [0] * (4 - len(e.shape))
            tensor_rows.append(TENSOR.pack(name_offsets[e.name], len(e.name.encode()), e.dtype, len(e.shape), 0,
                                           region, *dims, pos, e.size, crc, 0, 0))
        f.truncate(file_size)  # zero padding up to the last region's end
        meta = cfg + b"".join(region_rows) + b"".join(tensor_rows) + bytes(strings) + js
        assert len(meta) == meta_size
        head = HEADER.pack(MAGIC, VERSION, HEADER.size, file_size, HEADER.size, meta_size, zlib.crc32(meta),
                           ALIGNMENT, len(regions), n_tensors, packing, 0)
        f.seek(0)
        f.write(head[:60] + struct.pack("<I", zlib.crc32(head[:60])) + meta)
    return Path(path)


def _raw(tensors, name: str) -> Entry:
    """A tensor stored as it is (float32, float16, int8, uint8 or uint32, at most 4 dimensions)."""
    dtype, shape = np.dtype(str(tensors.dtype(name)).removeprefix("torch.")), tensors.shape(name)
    if dtype not in DTYPE_OF_NUMPY:
        raise PackError(f"{name}: dtype {dtype} cannot be stored (float32, float16, int8, uint8 or uint32)")
    if len(shape) > 4:
        raise PackError(f"{name}: {len(shape)} dimensions, at most 4 can be stored")
    size = math.prod(shape) * dtype.itemsize
    return Entry(name, DTYPE_OF_NUMPY[dtype], shape, size, lambda: _row_blocks(tensors, name, shape, size))


EMBED_CODES, EMBED_ROW_CRCS = "model.embed_tokens.codes", "model.embed_tokens.row_crc32"


def _row_crcs(tensors, name: str, crc_name: str) -> Entry:
    """CRC-32 of each row of the int8 table `name` [V, H] as U32 [V]: the runtime reads an untied embedding only at
    the rows a prompt looks up, and checks each against its own CRC (the table's CRC needs the whole table)."""
    rows, cols = tensors.shape(name)

    def payload():
        crcs = [c for block in _row_blocks(tensors, name, (rows, cols), rows * cols) for c in row_crcs(block, cols)]
        return [np.asarray(crcs, np.uint32).tobytes()]
    return Entry(crc_name, U32, (rows,), 4 * rows, payload)


def row_crcs(table, cols: int) -> list[int]:
    """The CRC-32 of each `cols`-byte row of a row-major table (bytes-like), as model.embed_tokens.row_crc32 holds."""
    view = memoryview(table).cast("B")
    return [zlib.crc32(view[a : a + cols]) for a in range(0, len(view), cols)]


RAW_BLOCK_BYTES = 32 << 20  # a large raw tensor (the embedding table) is read and written in blocks of rows


def _row_blocks(tensors, name: str, shape: tuple[int, ...], size: int) -> Iterator[memoryview]:
    rows = shape[0] if shape else 1
    step = max(1, rows * RAW_BLOCK_BYTES // size) if size > RAW_BLOCK_BYTES else rows
    for a in range(0, rows, step):
        block = tensors.read(name) if step == rows else tensors.read_rows(name, a, min(a + step, rows))
        yield byte_view(block)


def _group_by_region(entries):
    """[(kind, layer, entries in on-disk order)]: the embedding, each layer in turn, then everything else."""
    embedding, layers, final = [], {}, []
    for e in entries:
        m = _LAYER_NAME.fullmatch(e.name)
        if m:
            layers.setdefault(int(m.group(1)), []).append(e)
        elif e.name.startswith("model.embed_tokens."):
            embedding.append(e)
        else:
            final.append(e)

    def order(e):
        rest = _LAYER_NAME.fullmatch(e.name).group(2)
        module = next((i for i, m in enumerate(MODULE_ORDER) if rest.startswith(m + ".")), len(MODULE_ORDER))
        return module, e.name

    def by_name(e):
        return e.name

    out = [(REGION_EMBEDDING, 0, sorted(embedding, key=by_name))] if embedding else []
    out += [(REGION_LAYER, i, sorted(layers[i], key=order)) for i in sorted(layers)]
    out += [(REGION_FINAL, 0, sorted(final, key=by_name))] if final else []
    return out


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


# --- reading --------------------------------------------------------------------------------------------------------

class PackedFile:
    """A validated packed model file. Tensor payloads are read on demand with their CRC-32 checked."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            actual_size = os.fstat(f.fileno()).st_size
            head = f.read(HEADER.size)
            self._check(len(head) == HEADER.size, f"truncated: {actual_size} bytes, smaller than the 64-byte header")
            (magic, version, header_size, file_size, meta_offset, meta_size, meta_crc, alignment, n_regions,
             n_tensors, self.packing, header_crc) = HEADER.unpack(head)
            self._check(magic == MAGIC, f"bad magic {magic!r}: not an EdgeFlow packed model file")
            self._check(version in READABLE_VERSIONS,
                        f"format version {version}, this reader supports versions {READABLE_VERSIONS}")
            self._check(zlib.crc32(head[:60]) == header_crc, "header checksum mismatch")
            self._check(header_size == HEADER.size, f"header_size {header_size}, expected {HEADER.size}")
            self._check(file_size == actual_size, f"header says {file_size} bytes but the file has {actual_size} "
                        "(truncated or appended to)")
            self._check(alignment >= TENSOR_ALIGN and alignment & (alignment - 1) == 0,
                        f"alignment {alignment} is not a power of two >= {TENSOR_ALIGN}")
            expect_meta = CONFIG.size + REGION.size * n_regions + TENSOR.size * n_tensors
            self._check(meta_offset == HEADER.size and expect_meta <= meta_size <= file_size - meta_offset,
                        f"metadata range [{meta_offset}, +{meta_size}) is inconsistent with the file")
            f.seek(meta_offset)
            meta = f.read(meta_size)
        self._check(zlib.crc32(meta) == meta_crc, "metadata checksum mismatch")
        self.alignment, self.file_size, self.version = alignment, file_size, version
        self._parse_meta(meta, n_regions, n_tensors)
        self._check_row_crc_table()

    def _parse_meta(self, meta: bytes, n_regions: int, n_tensors: int) -> None:
        cfg = CONFIG.unpack_from(meta, 0)
        strings_size, json_size = cfg[11], cfg[12]
        pos = CONFIG.size + REGION.size * n_regions + TENSOR.size * n_tensors
        self._check(pos + strings_size + json_size == len(meta), "metadata size disagrees with its tables")
        strings = meta[pos : pos + strings_size]
        try:
            self.provenance = json.loads(meta[pos + strings_size :])
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise PackError(f"{self.path}: provenance JSON is invalid ({e})") from None
        self.config = dict(zip(PACKED_INT_FIELDS, cfg[:8]), rms_norm_eps=cfg[8], rope_theta=cfg[9],
                           tie_word_embeddings=bool(cfg[10] & 1))

        self.regions: list[RegionInfo] = []
        end_prev, listed = HEADER.size + len(meta), 0
        for i in range(n_regions):
            r = RegionInfo(*REGION.unpack_from(meta, CONFIG.size + REGION.size * i))
            self._check(r.kind in (REGION_EMBEDDING, REGION_LAYER, REGION_FINAL), f"region {i}: unknown kind {r.kind}")
            self._check(r.offset % self.alignment == 0 and r.size % self.alignment == 0,
                        f"region {i} at {r.offset}+{r.size} is not {self.alignment}-aligned")
            self._check(r.offset >= end_prev and r.offset + r.size <= self.file_size,
                        f"region {i} [{r.offset}, {r.offset + r.size}) overlaps the metadata, another region or "
                        f"points past the end of the file ({self.file_size} bytes)")
            # regions list consecutive runs of the tensor table, in order, covering it exactly
            self._check(r.first_tensor == listed and r.first_tensor + r.n_tensors <= n_tensors,
                        f"region {i} lists tensors out of order or past the index")
            listed += r.n_tensors
            end_prev = r.offset + r.size
            self.regions.append(r)

        self._check(listed == n_tensors, "the regions do not list every tensor")
        self.tensors: list[TensorInfo] = []
        self._by_name: dict[str, int] = {}
        base = CONFIG.size + REGION.size * n_regions
        for i in range(n_tensors):
            (name_off, name_len, dtype, ndim, _, region, *dims, offset, size, crc, _, _) = TENSOR.unpack_from(
                meta, base + TENSOR.size * i)
            self._check(name_len > 0 and name_off + name_len <= strings_size, f"tensor {i}: name outside the strings")
            try:
                name = strings[name_off : name_off + name_len].decode()
            except UnicodeDecodeError:
                raise PackError(f"{self.path}: tensor {i}: name is not UTF-8") from None
            self._check(ndim <= 4 and region < n_regions, f"{name}: ndim {ndim} or region {region} out of range")
            reg = self.regions[region]
            self._check(reg.first_tensor <= i < reg.first_tensor + reg.n_tensors, f"{name}: not listed by its region")
            self._check(offset % TENSOR_ALIGN == 0 and reg.offset <= offset and offset + size <= reg.offset + reg.size,
                        f"{name}: payload [{offset}, {offset + size}) lies outside its region "
                        f"[{reg.offset}, {reg.offset + reg.size}) or is not {TENSOR_ALIGN}-aligned")
            info = TensorInfo(name, dtype, tuple(dims[:ndim]), region, offset, size, crc)
            self._check_size(info)
            self._check(name not in self._by_name, f"tensor name {name!r} appears twice")
            self._by_name[name] = i
            self.tensors.append(info)

    def _check_size(self, t: TensorInfo) -> None:
        self._check(t.dtype != U32 or self.version >= 2,
                    f"{t.name}: dtype u32 needs format version 2, the file is version {self.version}")
        self._check(self.version >= 3 or t.name.rpartition(".")[2] not in NUMERICS_FIELDS,
                    f"{t.name}: a linear's numerics need format version 3, the file is version {self.version}")
        self._check(self.version >= 4 or t.name != f"{HEAD}.weight" or layout_of_dtype(t.dtype) is None,
                    f"{t.name}: a quantized LM head needs format version 4, the file is version {self.version}")
        count = int(np.prod(t.shape, dtype=np.int64)) if t.shape else 1
        if t.dtype in RAW_DTYPES:
            expect = count * np.dtype(RAW_DTYPES[t.dtype]).itemsize
            self._check(t.size == expect, f"{t.name}: {t.size} bytes, its dtype and shape {t.shape} need {expect}")
        elif (layout := layout_of_dtype(t.dtype)) is not None:
            self._check(len(t.shape) == 2 and all(1 <= n < 2**31 for n in t.shape),
                        f"{t.name}: a quantized weight must be 2-D with 1 <= C, D < 2^31, got shape {t.shape}")
            if not layout.has_bits_section:
                self._check(t.size == count, f"{t.name}: {t.size} bytes, raw INT8 codes {t.shape} need {count}")
        else:
            raise PackError(f"{self.path}: {t.name}: unknown dtype {t.dtype}")

    def _check_row_crc_table(self) -> None:
        if EMBED_ROW_CRCS not in self._by_name:
            return
        crcs = self.info(EMBED_ROW_CRCS)
        table = self.info(EMBED_CODES) if EMBED_CODES in self._by_name else None
        self._check(table is not None and table.dtype == I8 and len(table.shape) == 2 and crcs.dtype == U32
                    and crcs.shape == table.shape[:1] and crcs.region == table.region,
                    f"{EMBED_ROW_CRCS} must be u32 [V] beside an i8 [V, H] {EMBED_CODES} in its region")

    def _check_rows(self, table: bytes) -> None:
        """The embedding table read whole against its row-CRC table (docs/format.md): every entry must match."""
        cols = self.info(EMBED_CODES).shape[1]
        entries = np.frombuffer(self.payload(EMBED_ROW_CRCS), "<u4")
        for r, (crc, entry) in enumerate(zip(row_crcs(table, cols), entries)):
            self._check(crc == entry, f"{EMBED_ROW_CRCS}: the entry of row {r} disagrees with the row")

    def _check(self, ok: bool, message: str) -> None:
        if not ok:
            raise PackError(f"{self.path}: {message}")

    # --- access --------------------------------------------------------------------------------------------------

    @property
    def float_outputs(self) -> bool:
        """Whether the file's linears give float outputs (no output grids: a version 1 or 2 file, or an artifact
        quantized with output_grid=none), which no NPU computes; else the runtime requantizes as an NPU does."""
        return not any(t.name.endswith(".out_step") for t in self.tensors)

    def info(self, name: str) -> TensorInfo:
        if name not in self._by_name:
            raise KeyError(f"{self.path}: no tensor {name!r}")
        return self.tensors[self._by_name[name]]

    def payload(self, name: str) -> bytes:
        t = self.info(name)
        with open(self.path, "rb") as f:
            data = os.pread(f.fileno(), t.size, t.offset)
        self._check(len(data) == t.size, f"{name}: short read")
        self._check(zlib.crc32(data) == t.crc32, f"{name}: checksum mismatch (payload corrupt)")
        if name == EMBED_CODES and EMBED_ROW_CRCS in self._by_name:
            self._check_rows(data)
        return data

    def array(self, name: str) -> np.ndarray:
        """A raw tensor (float32, float16, int8, uint8, uint32) as numpy, shape as stored."""
        t = self.info(name)
        if t.dtype not in RAW_DTYPES:
            raise PackError(f"{name} is a packed quantized weight: use quant_codes()")
        return np.frombuffer(self.payload(name), RAW_DTYPES[t.dtype]).reshape(t.shape)

    def quant_codes(self, module: str) -> tuple[np.ndarray, np.ndarray]:
        """(codes int8 [C, D], bits uint8 [C]) of the quantized linear `module`, unpacked by the reference decoder."""
        t = self.info(f"{module}.weight")
        layout = layout_of_dtype(t.dtype)
        if layout is None:
            raise PackError(f"{t.name} is not a packed quantized weight")
        try:
            return layout.decode(self.payload(t.name), *t.shape)
        except PackError as e:
            raise PackError(f"{self.path}: {t.name}: {e}") from None

    def linear_stats(self) -> dict:
        """Bytes the quantized linears occupy (packed weights with their bit-width section, plus float32 w_scale);
        an LM head packed at the bit budget is not a linear here (the manifest's `lm_head` entry has its bits)."""
        weights = payload = scales = 0
        for t in self.tensors:
            if layout_of_dtype(t.dtype) is not None and t.name != f"{HEAD}.weight":
                weights += t.shape[0] * t.shape[1]
                payload += t.size
                scales += self.info(t.name[: -len(".weight")] + ".w_scale").size
        bpw = 8 * (payload + scales) / weights if weights else 0.0
        return {"weights": weights, "payload_bytes": payload, "scale_bytes": scales,
                "bits_per_weight": bpw, "file_bytes": self.file_size}
