"""Files, progress and the shared option vocabulary of the CLI (FPS-CLI-4, FPS-CLI-5, FPS-CLI-6).

Atomic writes are shown by interrupting a write half-way (an interrupt, a full
disk) and by killing a real ``vectors generate`` process: the target keeps its
old bytes and no partial file is left at it.  The vocabulary tests show that
each new spelling gives exactly the bits of the API call, and that the old
spelling still works but is not documented.
"""

from __future__ import annotations

import ast
import errno
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import fpspec.io as fio
from fpspec.cli import build_parser, main
from fpspec.cli.options import progress_stream
from fpspec.convert import decode, encode
from fpspec.errors import FpspecError
from fpspec.quantization import dequantize, quantize
from fpspec.quantized import QuantizedTensor
from fpspec.vectors.declare import Declaration
from fpspec.vectors.generate import generate
from fpspec.vectors.harness import Harness, register_converter
from fpspec.vectors.pack import MANIFEST, pack_id_of

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "vectors" / "v1"
MINI_SETS = ("decode-e2m1", "decode-e4m3", "encode-fp32-e2m1-boundary", "gemm-exact-e4m3-wide")


def _mini_pack(dest: Path) -> Path:
    """A valid pack holding four small sets of vectors/v1."""
    dest.mkdir()
    manifest = json.loads((PACK / MANIFEST).read_text())
    manifest["sets"] = [e for e in manifest["sets"] if e["name"] in MINI_SETS]
    manifest["pack_id"] = pack_id_of(manifest["sets"])
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for n in MINI_SETS:
        shutil.copy(PACK / f"{n}.npz", dest / f"{n}.npz")
    return dest


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def x(tmp_path) -> Path:
    rng = np.random.default_rng(3)
    p = tmp_path / "x.npy"
    np.save(p, (rng.standard_normal((32, 64)) * 4).astype(np.float32))
    return p


# ------------------------------------------------------------------ atomic writes (FPS-CLI-4)
@pytest.mark.parametrize("failure", ["interrupt", "disk-full"])
@pytest.mark.parametrize("command", ["encode", "quantize", "dequantize", "check-report"])
def test_interrupted_write_keeps_the_old_file(tmp_path, x, monkeypatch, capsys, command, failure):
    """FPS-CLI-4: a write that dies half-way (Ctrl-C, ENOSPC) leaves the existing output byte for
    byte and no temporary file beside it."""
    quantize(np.load(x), "ue5m3").to_npz(tmp_path / "q.npz")
    argv = {"encode": ["encode", str(x), "--to", "e2m1", "--out", str(tmp_path / "out.npy")],
            "quantize": ["quantize", str(x), "--scheme", "ue5m3", "--out", str(tmp_path / "out.npz")],
            "dequantize": ["dequantize", str(tmp_path / "q.npz"), "--out", str(tmp_path / "out.npy")],
            "check-report": ["check", str(PACK), str(tmp_path), "--select", "decode-e2m1", "--report",
                             str(tmp_path / "out.json")]}[command]
    target = Path(argv[-1])
    target.write_bytes(b"the previous output\n")
    before = _tree(tmp_path)
    real_atomic_write = fio.atomic_write

    def dying_write(fh):
        fh.write(b"half of the new output")
        if failure == "interrupt":
            raise KeyboardInterrupt
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fio, "atomic_write", lambda path, write: real_atomic_write(path, dying_write))
    if failure == "interrupt":
        with pytest.raises(KeyboardInterrupt):
            main(argv)
    else:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert re.search(rf"{re.escape(target.name)}: cannot write \(No space left on device\); nothing was written",
                         err), err
    assert _tree(tmp_path) == before


def test_written_files_have_the_ordinary_mode(tmp_path, x):
    """FPS-CLI-4: every output, whatever writes it, gets 0666 less the umask (0644 here)."""
    old = os.umask(0o022)
    try:
        q, d = tmp_path / "q.npz", tmp_path / "d.npy"
        assert main(["encode", str(x), "--to", "e4m3", "--out", str(tmp_path / "c.npy")]) == 0
        assert main(["quantize", str(x), "--scheme", "nvfp4", "--out", str(q)]) == 0
        assert main(["dequantize", str(q), "--out", str(d)]) == 0
        assert main(["gemm", str(q), str(q), "--model", "exact", "--out", str(tmp_path / "g.npy")]) == 0
        pack = _mini_pack(tmp_path / "pack")
        assert main(["vectors", "run-reference", str(pack), "--out", str(tmp_path / "res"), "--quiet"]) == 0
        assert main(["check", str(pack), str(tmp_path / "res"), "--report", str(tmp_path / "r.json"),
                     "--junit", str(tmp_path / "r.xml")]) == 0
    finally:
        os.umask(old)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "pack" not in p.parts and p.name != "x.npy"]
    assert len(written) == 10
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {p.name: "0o644" for p in written}
    assert not [p for p in tmp_path.rglob("*") if "partial" in p.name]


@pytest.mark.slow
def test_killed_generate_leaves_the_previous_pack(tmp_path):
    """FPS-CLI-4: SIGKILL in the middle of `vectors generate` leaves the previous pack at --out
    untouched (the new pack is built in a hidden folder beside it)."""
    out = _mini_pack(tmp_path / "pack")
    before = _tree(out)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "fpspec", "vectors", "generate", "--out", str(out), "--quiet"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until the new pack has some sets
            stages = [p for p in tmp_path.glob(".pack.*.partial") if len(list(p.glob("*.npz"))) >= 3]
            if stages or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "generate ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _tree(out) == before


def test_failed_generate_keeps_the_previous_pack_and_cleans_up(tmp_path):
    """FPS-CLI-4: an error half-way through generate (here: after the second set) changes nothing."""
    out = _mini_pack(tmp_path / "pack")
    before = _tree(out)
    seen = []

    def boom(vs):
        seen.append(vs.name)
        if len(seen) == 2:
            raise RuntimeError("disk went away")

    with pytest.raises(RuntimeError):
        generate(out, 1, progress=None, on_set=boom)
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]


def test_results_never_go_into_a_pack(tmp_path):
    """FPS-CLI-4: Harness.save and write_results refuse a pack folder, like run-reference."""
    pack = _mini_pack(tmp_path / "pack")
    h = Harness(pack, select="decode-e2m1")
    for s in h.sets():
        s.submit({k: np.zeros_like(s.vs.outputs[k]) for k in s.outputs})
    with pytest.raises(FpspecError, match=r"is also an input"):
        h.save(pack)
    with pytest.raises(FpspecError, match=r"is a vector pack folder"):
        h.save(_mini_pack(tmp_path / "other"))
    h.save(tmp_path / "res")
    assert sorted(p.name for p in (tmp_path / "res").iterdir()) == ["decode-e2m1.npz"]


# ------------------------------------------------------------------ progress (FPS-CLI-6)
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("tty, quiet", [(True, False), (True, True), (False, False)])
def test_run_reference_progress_only_on_a_terminal(tmp_path, monkeypatch, capsys, tty, quiet):
    """FPS-CLI-6: progress lines on a terminal; none when piped or with --quiet; stdout has the result."""
    pack = _mini_pack(tmp_path / "pack")
    term = _Terminal()
    if tty:
        monkeypatch.setattr(sys, "stderr", term)
    argv = ["vectors", "run-reference", str(pack), "--out", str(tmp_path / "res")] + (["--quiet"] if quiet else [])
    assert main(argv) == 0
    out, err = capsys.readouterr()
    shown = term.getvalue() + err
    if tty and not quiet:
        assert shown.splitlines() == [f"[{i}/4] {n}" for i, n in enumerate(sorted(MINI_SETS), 1)]
    else:
        assert shown == ""
    assert out.startswith("wrote fpspec fast-path results of 4 sets")


@pytest.mark.parametrize("argv", [["vectors", "generate", "--out", "p"], ["vectors", "run-reference", "p", "--out", "r"],
                                  ["probe", "--gemm", "numpy"]])
def test_long_commands_share_the_progress_switch(monkeypatch, argv):
    """FPS-CLI-6: the three long commands take --quiet and show progress only on a terminal."""
    parser = build_parser()
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert progress_stream(parser.parse_args(argv)) is term
    assert progress_stream(parser.parse_args(argv + ["--quiet"])) is None
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress_stream(parser.parse_args(argv)) is None


def test_probe_counts_gemm_calls_on_a_terminal(monkeypatch, capsys):
    """FPS-CLI-6: probe shows a running count of GEMM calls on a terminal, one line at the end."""
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    rc = main(["probe", "--gemm", "fpspec:km-h100-fp8", "--operand-format", "e4m3", "--k", "256", "--scan-k", "96",
               "--accept-shapes", "8x8x256"])
    assert rc == 0
    text = term.getvalue()
    counts = [int(n) for n in re.findall(r"\rfpspec probe: GEMM call (\d+) \((?:matmul|rowdot|matmul_scaled)", text)]
    assert counts == list(range(1, len(counts) + 1)) and len(counts) > 5
    assert text.endswith("\n") and text.count("\n") == 1
    assert "acceptance: 64/64" in capsys.readouterr().out


# ------------------------------------------------------------------ vocabulary (FPS-CLI-5)
def test_encode_to_and_decode_from_give_the_api_bits(tmp_path, x):
    """FPS-CLI-5: encode --to / decode --from (and the hidden old --format) match the API; --impl
    exact and fast are bit-equal through the CLI."""
    c1, c2, c3 = (tmp_path / f"c{i}.npy" for i in range(3))
    assert main(["encode", str(x), "--to", "e4m3", "--out", str(c1)]) == 0
    assert main(["encode", str(x), "--format", "e4m3", "--out", str(c2)]) == 0
    assert main(["encode", str(x), "--to", "e4m3", "--impl", "exact", "--out", str(c3)]) == 0
    want = encode(np.load(x), "e4m3")
    for c in (c1, c2, c3):
        assert np.array_equal(np.load(c), want)
    every = tmp_path / "every.npy"
    np.save(every, np.arange(256, dtype=np.uint8))
    for impl in ("fast", "exact"):
        out = tmp_path / f"v-{impl}.npy"
        assert main(["decode", str(every), "--from", "e4m3", "--impl", impl, "--out", str(out)]) == 0
        assert np.array_equal(np.load(out).view(np.uint64), decode(np.arange(256, dtype=np.uint8), "e4m3").view(np.uint64))
    assert main(["decode", str(every), "--format", "e4m3", "--out", str(tmp_path / "old.npy")]) == 0


def test_decode_impl_exact_matches_fast_for_every_small_format():
    """FPS-CLI-5: decode(impl="exact") (each code's exact value) equals the table path bit for bit,
    signed zeros and NaNs included, for every format of at most 16 bits."""
    from fpspec.formats import FORMATS

    for name, f in FORMATS.items():
        if f.bits > 16:
            continue
        codes = np.arange(f.num_codes, dtype=np.uint8 if f.bits <= 8 else np.uint16)
        assert np.array_equal(decode(codes, name, impl="exact").view(np.uint64),
                              decode(codes, name).view(np.uint64)), name


def test_help_shows_the_new_names_only(capsys):
    """FPS-CLI-5: --help and the generated docs name --to, --from, --operand-format, --gemm; the old
    spellings are read but not shown."""
    for cmd, new, old in (("encode", "--to", "--format"), ("decode", "--from", "--format"),
                          ("gemm", "--operand-format", "--format"), ("probe", "--gemm", "--target")):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        text = capsys.readouterr().out
        assert new in text and not re.search(rf"{old}\b(?!-)", text.replace("--target T", "")), (cmd, text)
    rst = (ROOT / "docs" / "_ext" / "fpspec_tables.py").read_text()
    assert "argparse.SUPPRESS" in rst


@pytest.mark.parametrize("tile, same_as", [
    (["--tile", "1x16"], []), (["--tile", "16x16"], ["--tile", "BxB"]), (["--tile", "1x32"], ["--block", "32"]),
    (["--tile", "32x32"], ["--tile", "BxB", "--block", "32"]), (["--tile", "1X16"], []),
    (["--tile", "16x16", "--block", "16"], ["--tile", "BxB"]),
])
def test_tile_as_typed(tmp_path, x, tile, same_as):
    """FPS-CLI-5: --tile 1x16 / 16x16 / 1x32 / 32x32 are 1xB / BxB with that B: identical files' arrays."""
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["quantize", str(x), "--scheme", "ue5m3", *tile, "--out", str(a)]) == 0
    assert main(["quantize", str(x), "--scheme", "ue5m3", *same_as, "--out", str(b)]) == 0
    qa, qb = QuantizedTensor.from_npz(a), QuantizedTensor.from_npz(b)
    assert (qa.tile, qa.block) == (qb.tile, qb.block)
    assert np.array_equal(qa.codes, qb.codes) and np.array_equal(qa.scales, qb.scales)


def test_quantize_nbits_reaches_stochastic_rounding(tmp_path, x):
    """FPS-CLI-5: quantize --nbits 16 takes uint16 random values; fast and exact agree, and the CLI
    writes what the API computes."""
    r = np.random.default_rng(9).integers(0, 1 << 16, (32, 64), dtype=np.uint16)
    rp, out = tmp_path / "r.npy", tmp_path / "q.npz"
    np.save(rp, r)
    assert main(["quantize", str(x), "--scheme", "ue5m3", "--rounding", "sr", "--rbits", str(rp), "--nbits", "16",
                 "--out", str(out)]) == 0
    fast = quantize(np.load(x), "ue5m3", rounding="sr", rbits=r, nbits=16)
    exact = quantize(np.load(x), "ue5m3", rounding="sr", rbits=r, nbits=16, impl="exact")
    assert np.array_equal(fast.codes, exact.codes)
    assert np.array_equal(QuantizedTensor.from_npz(out).codes, fast.codes)


@pytest.mark.parametrize("shape, pad", [((2, 3, 64), False), ((4, 2, 8, 32), False), ((2, 3, 24), True)])
def test_dequantize_restores_the_source_shape(tmp_path, shape, pad):
    """A tensor of more than two dimensions comes back in its own shape (padding dropped), through
    the API and through the files; its values are the 2-D view's."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    q = quantize(x, "nvfp4", pad=pad)
    assert q.source_shape == shape
    flat = quantize(x.reshape(-1, shape[-1]), "nvfp4", pad=pad)
    want = dequantize(flat)[:int(np.prod(shape[:-1])), :shape[-1]].reshape(shape)
    assert np.array_equal(dequantize(q).view(np.uint32), want.view(np.uint32))
    np.save(tmp_path / "x.npy", x)
    argv = ["quantize", str(tmp_path / "x.npy"), "--scheme", "nvfp4", "--out", str(tmp_path / "q.npz")]
    assert main(argv + (["--pad"] if pad else [])) == 0
    assert main(["dequantize", str(tmp_path / "q.npz"), "--out", str(tmp_path / "d.npy")]) == 0
    back = np.load(tmp_path / "d.npy")
    assert back.shape == shape and np.array_equal(back.view(np.uint32), want.view(np.uint32))
    # columnwise keeps the documented view layout (X^T of the 2-D view)
    assert dequantize(quantize(x, "nvfp4", columnwise=True, pad=True)).ndim == 2


def test_quantized_npz_round_trip_validates(tmp_path):
    """FPS-CLI-3: what quantize writes reads back valid, for every scheme, with source_shape kept."""
    x = np.random.default_rng(1).standard_normal((2, 16, 32)).astype(np.float32)
    for scheme in ("ue5m3", "nvfp4", "mxfp4"):
        q = quantize(x, scheme)
        q.to_npz(tmp_path / "q.npz")
        r = QuantizedTensor.from_npz(tmp_path / "q.npz")
        assert r.source_shape == (2, 16, 32) and r.meta() == q.meta()
        assert np.array_equal(dequantize(r).view(np.uint32), dequantize(q).view(np.uint32))


# ------------------------------------------------------------------ the house
def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_harness_does_not_import_the_torch_adapter():
    """The harness <-> adapter circle is gone: no module of fpspec.vectors imports fpspec.adapters."""
    for p in (ROOT / "fpspec" / "vectors").glob("*.py"):
        assert not [m for m in _imports(p) if "adapters" in m], p


def test_harness_takes_other_arrays_through_a_converter(tmp_path):
    """FPS-CHK-8, FPS-CHK-9: a registered converter (as the torch adapter registers) or to_bits=
    turns foreign outputs into bit patterns; anything else is refused with a message."""

    class Boxed:
        def __init__(self, a):
            self.a = a

    pack = _mini_pack(tmp_path / "pack")
    h = Harness(pack, select="decode-e2m1")
    s = next(h.sets())
    name = next(iter(s.outputs))
    with pytest.raises(FpspecError, match=r"decode-e2m1/\w+: a .*Boxed is not a NumPy array .* to_bits="):
        s.submit({name: Boxed(s.vs.outputs[name])})
    h2 = Harness(pack, select="decode-e2m1", to_bits=lambda b: b.a)
    next(h2.sets()).submit({k: Boxed(s.vs.outputs[k]) for k in s.outputs})
    assert h2.report().exit_code == 0
    register_converter(lambda v: isinstance(v, Boxed), lambda b: b.a)
    s.submit({k: Boxed(s.vs.outputs[k]) for k in s.outputs})
    assert h.report().exit_code == 0


def test_no_module_at_the_package_root_sits_above_the_cli():
    """bench_quantize lives in the CLI now; no fpspec/*.py imports fpspec.cli."""
    assert not (ROOT / "fpspec" / "bench_quantize.py").exists()
    for p in (ROOT / "fpspec").glob("*.py"):
        if p.name != "__main__.py":  # the entry point of `python -m fpspec` is the CLI's
            assert not [m for m in _imports(p) if m.startswith((".cli", "fpspec.cli"))], p
    parser = build_parser()
    bench = next(a for a in parser._subparsers._group_actions[0].choices["bench"]._actions
                 if hasattr(a, "choices") and isinstance(a.choices, dict))
    assert set(bench.choices) == {"encode", "quantize", "gemm"}


def test_declaration_names_are_canonical():
    """FPS-CHK-5: a rounding alias is stored under its canonical name, so it matches set metas."""
    d = Declaration.from_mapping({"rounding": {"e2m1": ["sr/8", "rz"]}, "operations": ["encode"]})
    assert d.rounding == {"e2m1": ("sr-midpoint/8", "rtz")}


def test_nearest_is_refused_as_ambiguous():
    """FPS-RND-16: "nearest" means ties-to-even in IEEE 754 and ties-away in microxcaling,
    so fpspec refuses it instead of guessing."""
    from fpspec.errors import FpspecError
    from fpspec.choices import RoundingMode

    with pytest.raises(FpspecError, match="unknown rounding mode 'nearest'"):
        RoundingMode.parse("nearest")


def _layout_modules(readme: str) -> set[str]:
    """Module paths named in the first column of README's layout table."""
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set()
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        folder = ""
        for item in re.findall(r"`([^`]+)`", line.split(" | ")[0]):
            if item.endswith("/"):
                folder = item
            elif "/" in item:
                named.add(item)
                folder = item.rsplit("/", 1)[0] + "/"
            else:
                named.add(folder + item)
    return named


def test_readme_layout_names_every_module():
    """The README layout table names every fpspec/**.py (a package's __init__.py by its folder)."""
    readme = (ROOT / "README.md").read_text()
    named = _layout_modules(readme)
    folders = set(re.findall(r"`(fpspec/[^`]*/)`", readme))
    missing = []
    for p in sorted((ROOT / "fpspec").rglob("*.py")):
        rel = str(p.relative_to(ROOT))
        if p.name == "__init__.py" and str(p.parent.relative_to(ROOT)) + "/" in folders | {"fpspec/"}:
            continue
        if rel not in named:
            missing.append(rel)
    assert not missing, f"README layout table lacks {missing}"
    stale = sorted(m for m in named if m.endswith(".py") and not (ROOT / m).exists())
    assert not stale, f"README layout table names modules that do not exist: {stale}"
