"""Safe file I/O shared by the CLI, the vector pack and the checker (FPS-CLI-3, FPS-CLI-4).

Reading never executes code and never trusts a header: every ``.npy`` (alone or
inside an ``.npz``) is parsed here, its magic, header and data length checked
before any memory is allocated, with ``allow_pickle`` never set.  Each problem
is one :class:`~fpspec.errors.FpspecError` that names the file (and the archive
member): an empty file, text or garbage, a bad header, truncated data, a damaged
or truncated zip archive, a ``.npy`` where an ``.npz`` belongs and the reverse.
Only an array of Python objects is refused for needing pickle.  An array stored in
the other byte order (a big-endian ``>f4`` written on another machine) is valid
data: it comes back in this machine's byte order, with the same values
(:func:`native_byte_order`, which the public verbs apply to the arrays they are
given, so no kernel sees a non-native array).

Writing is atomic (FPS-CLI-4): the bytes go to a temporary file beside the
target, which is flushed to disk and then renamed over the target.  A killed
run or a full disk leaves no partial file and never changes an existing output.
:func:`check_output` applies the one set of ``--out`` rules every command uses.
"""

from __future__ import annotations

import os
import secrets
import tokenize
import zipfile
from pathlib import Path
from typing import IO, Callable, Iterable

import numpy as np
from numpy.lib import format as npy_format

from .errors import FpspecError

__all__ = ["load_npy", "load_npz", "save_npy", "save_npz", "atomic_write", "write_text",
           "check_output", "check_output_folder", "native_byte_order", "NPY_MAGIC"]

NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
#: deflate cannot expand data more than about 1032 : 1; a member that claims more is damaged.
_MAX_DEFLATE_RATIO = 1032


# ---------------------------------------------------------------------- reading
def native_byte_order(a: object) -> object:
    """``a`` with its elements in this machine's byte order when it is a NumPy array stored in
    the other one (``>f4``, ``>f8``, ``>u2``, ...): a copy with the same values.  Anything else
    (a native array, a list, a scalar, a QuantizedTensor) is returned as it is.

    This is the one door where the byte order is settled: the ``.npy`` readers here and the
    public verbs (``encode``, ``decode``, ``quantize``, ``gemm``) call it on what they are
    given, so the kernels only ever see native arrays (docs/cli.rst, "Input arrays")."""
    if isinstance(a, np.ndarray) and not a.dtype.isnative:
        return a.astype(a.dtype.newbyteorder("="))
    return a


def _describe_start(head: bytes) -> str:
    """Why a file is not a NumPy file, judged from its first bytes."""
    if not head:
        return "empty file (0 bytes)"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return f"unknown content (starts with {head[:8]!r})"
    if all(c.isprintable() or c in "\r\n\t" for c in text):
        return f"a text file (starts with {text[:16]!r})"
    return f"unknown content (starts with {head[:8]!r})"


def _read_exact(fh: IO[bytes], n: int) -> bytearray:
    """``n`` bytes, fewer only at end of data."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = fh.readinto(view[got:])  # type: ignore[attr-defined]
        if not k:
            break
        got += k
    return buf if got == n else buf[:got]


def _read_npy(fh: IO[bytes], where: str, size: int) -> np.ndarray:
    """Parse one .npy stream of ``size`` bytes: magic, header, data (never pickle)."""
    head = fh.read(len(NPY_MAGIC))
    if head != NPY_MAGIC:
        if head[:4] in _ZIP_MAGIC:
            raise FpspecError(f"{where}: is an .npz archive, expected a single .npy array")
        raise FpspecError(f"{where}: not a .npy array: {_describe_start(head + fh.read(26))}")
    version = tuple(fh.read(2))
    if len(version) < 2:
        raise FpspecError(f"{where}: bad .npy header (the file ends after the magic)")
    try:
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(fh)
        else:
            raise FpspecError(f"{where}: .npy format version {'.'.join(map(str, version))} "
                              "is not supported (1.0 and 2.0 are)")
    except FpspecError:
        raise
    except (ValueError, SyntaxError, TypeError, tokenize.TokenError, UnicodeDecodeError, EOFError) as exc:
        raise FpspecError(f"{where}: bad .npy header ({_one_line(exc)})") from None
    if dtype.hasobject:
        raise FpspecError(f"{where}: holds Python objects (dtype {dtype}), which only pickle could "
                          "load; fpspec never unpickles")
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise FpspecError(f"{where}: bad .npy header (shape {shape})")
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    left = size - fh.tell()
    if nbytes > left:
        raise FpspecError(f"{where}: truncated .npy: the header promises {shape} {dtype} "
                          f"({nbytes} bytes of data), the file holds {max(left, 0)}")
    try:
        data = _read_exact(fh, nbytes)
    except MemoryError:
        raise FpspecError(f"{where}: {shape} {dtype} ({nbytes} bytes) does not fit in memory") from None
    if len(data) != nbytes:
        raise FpspecError(f"{where}: truncated .npy: expected {nbytes} bytes of data, read {len(data)}")
    try:
        arr = np.frombuffer(data, dtype=dtype, count=count)
    except ValueError as exc:
        raise FpspecError(f"{where}: bad .npy header ({_one_line(exc)})") from None
    if not dtype.isnative:  # the other byte order: valid data, swapped in place (the buffer is ours)
        arr = arr.byteswap(inplace=True).view(dtype.newbyteorder("="))
    if fortran:
        return arr.reshape(shape[::-1]).transpose()
    return arr.reshape(shape)


def _one_line(exc: BaseException) -> str:
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    return " ".join(text.split()) or type(exc).__name__


def _open_input(path: str | os.PathLike[str], kind: str) -> tuple[IO[bytes], int]:
    p = Path(path)
    if p.is_dir():
        raise FpspecError(f"{path}: is a folder, expected {kind}")
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise FpspecError(f"{path}: no such file") from None
    except OSError as exc:
        raise FpspecError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return fh, os.fstat(fh.fileno()).st_size


def load_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """Load one .npy array without pickle; a clear error names the file otherwise."""
    fh, size = _open_input(path, "a .npy array")
    with fh:
        if size == 0:
            raise FpspecError(f"{path}: empty file (0 bytes), not a .npy array")
        try:
            return _read_npy(fh, str(path), size)
        except OSError as exc:
            raise FpspecError(f"{path}: cannot read ({exc.strerror or exc})") from None


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load every array of an .npz archive without pickle into a dict (member name without .npy)."""
    fh, size = _open_input(path, "an .npz archive")
    with fh:
        head = fh.read(8)
        if head.startswith(NPY_MAGIC):
            raise FpspecError(f"{path}: is a .npy array, expected an .npz archive")
        if head[:4] not in _ZIP_MAGIC:
            raise FpspecError(f"{path}: not an .npz archive: {_describe_start(head + fh.read(24))}")
        fh.seek(0)
        try:
            zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as exc:
            raise FpspecError(f"{path}: damaged or truncated .npz archive ({_one_line(exc)})") from None
        out: dict[str, np.ndarray] = {}
        with zf:
            for info in zf.infolist():
                name = info.filename
                where = f"{path}: member {name}"
                if info.is_dir() or not name.endswith(".npy"):
                    raise FpspecError(f"{where} is not a .npy array")
                key = name[:-4]
                if key in out:
                    raise FpspecError(f"{where} appears twice")
                if info.compress_type != zipfile.ZIP_STORED and \
                        info.file_size > _MAX_DEFLATE_RATIO * max(info.compress_size, 1):
                    raise FpspecError(f"{where} claims {info.file_size} bytes from {info.compress_size}: damaged")
                try:
                    with zf.open(info) as member:
                        arr = _read_npy(member, where, info.file_size)
                        member.read()  # to the end: the CRC check runs there
                except FpspecError:
                    raise
                except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError) as exc:
                    raise FpspecError(f"{where} is damaged ({_one_line(exc)})") from None
                out[key] = arr
        return out


# ---------------------------------------------------------------------- writing
def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path``, then rename it to ``path``.

    The file gets the mode every new file gets (0666 less the umask: 0644 as a
    rule), like one written by ``open``.  On any error, or an interrupt, the
    temporary file is removed and ``path`` is left as it was (FPS-CLI-4).
    """
    target = Path(path)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.partial"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise FpspecError(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise FpspecError(f"{path}: cannot write ({exc.strerror or exc}); nothing was written") from None
        raise


def save_npy(path: str | os.PathLike[str], arr: np.ndarray) -> None:
    """Write one array as .npy (no pickle), atomically, to exactly ``path``."""
    a = np.asanyarray(arr)
    atomic_write(path, lambda fh: npy_format.write_array(fh, a, allow_pickle=False))


def save_npz(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> None:
    """Write an uncompressed .npz (no pickle), atomically, to exactly ``path``."""
    def write(fh: IO[bytes]) -> None:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, arr in arrays.items():  # streamed member by member, as numpy.savez does
                with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                    npy_format.write_array(member, np.asanyarray(arr), allow_pickle=False)
    atomic_write(path, write)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 text atomically (reports)."""
    data = text.encode("utf-8")
    atomic_write(path, lambda fh: fh.write(data))


# ---------------------------------------------------------------------- --out rules
def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_output(path: str | os.PathLike[str], *, suffix: str | None = None,
                 inputs: Iterable[str | os.PathLike[str] | None] = (), flag: str = "--out") -> Path:
    """The one set of rules for a file a command writes (FPS-CLI-4); returns it as a Path.

    * its folder must exist (fpspec creates no folder for a file output);
    * it must not be an existing folder, nor an existing non-regular file;
    * with ``suffix``, its name must end in it (nothing is appended silently);
    * it must not be one of the command's inputs.
    """
    p = Path(path)
    parent = p.parent
    if suffix is not None and p.suffix.lower() != suffix:
        raise FpspecError(f"{flag} {path}: the name must end in {suffix}, the suffix of what this command writes "
                          f"(fpspec never adds or changes a suffix; e.g. {p.with_suffix(suffix).name})")
    if p.is_dir():
        raise FpspecError(f"{flag} {path}: is a folder; give a file name")
    if p.exists() and not p.is_file():
        raise FpspecError(f"{flag} {path}: exists and is not a regular file")
    if not parent.is_dir():
        what = "does not exist" if not parent.exists() else "is not a folder"
        raise FpspecError(f"{flag} {path}: folder {parent} {what} (fpspec creates no folders for a file)")
    for i in inputs:
        if i is not None and _same(p, Path(i)):
            raise FpspecError(f"{flag} {path}: is also an input; choose another name so the input is kept")
    return p


def check_output_folder(path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str] | None] = (),
                        flag: str = "--out") -> Path:
    """The rules for a folder a command writes into: it may be created, its own folder must exist;
    it must not be an existing file nor one of the command's inputs."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise FpspecError(f"{flag} {path}: exists and is not a folder")
    parent = p.absolute().parent
    if not parent.is_dir():
        raise FpspecError(f"{flag} {path}: folder {p.parent} does not exist (fpspec creates only the last folder)")
    for i in inputs:
        if i is not None and _same(p, Path(i)):
            raise FpspecError(f"{flag} {path}: is also an input; choose another folder")
    return p
