"""``scripts/install_llama_cpp.sh`` on a new virtual environment: it installs the portable build
from the flag-named wheelhouse (no compile, no pip cache), records it, does nothing when that
build is installed already, and replaces a build made with other flags (a cached native wheel).
And the installed build's machine code holds no instruction past AVX2 on x86-64, so a CPU that
advertises AVX-512 or AMX but faults on them (the issue's machine) never runs one."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from litrag.models.checks import BUILD_RECORD, build_record

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install_llama_cpp.sh"


def install(python: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LITRAG_LLAMA_CMAKE_ARGS"}
    return subprocess.run(
        ["bash", str(SCRIPT), str(python)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.llm
def test_installs_the_named_build_once_and_replaces_another(tmp_path: Path) -> None:
    ours = build_record()
    assert ours is not None, "the test environment was not set up by scripts/install_llama_cpp.sh"
    assert Path(ours["wheel"]).is_file(), f"the wheelhouse lost {ours['wheel']}: rerun setup"
    assert ours["tag"] in ours["wheel"]  # the wheel's folder is named by the build's flags

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    first = install(python)
    assert first.returncode == 0, first.stderr
    assert "== building" not in first.stdout  # the wheel with these flags was there: no compile
    assert first.stdout.strip().endswith("installed: " + ours["baseline"])
    record = json.loads((env_dir / BUILD_RECORD).read_text())
    assert record["tag"] == ours["tag"] and record["cmake_args"] == ours["cmake_args"]
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('llama-cpp-python'))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.stdout.strip() == record["version"]  # its dependencies come with the extra

    again = install(python)  # the same build is installed: nothing to do
    assert again.returncode == 0 and again.stdout == ""

    # A build made with other flags (e.g. pip's default native one) is replaced, never kept.
    stale = dict(record, tag="native000000", cmake_args="-DGGML_NATIVE=ON")
    (env_dir / BUILD_RECORD).write_text(json.dumps(stale))
    replaced = install(python)
    assert replaced.returncode == 0 and "installed: " in replaced.stdout
    assert json.loads((env_dir / BUILD_RECORD).read_text())["tag"] == ours["tag"]


# What the portable build may never contain on x86-64: AVX-512 registers and masks, AMX tiles,
# VNNI dot products. Checked on the machine code itself, so it holds whatever CPU runs it.
BEYOND_AVX2 = re.compile(r"%zmm|%k[1-7]\b|tileloadd|tdpb|ldtilecfg|vpdpbusd|vpdpwssd")


@pytest.mark.llm
def test_the_installed_build_has_no_instruction_beyond_avx2(tmp_path: Path) -> None:
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the instruction families checked are x86-64's")
    objdump = shutil.which("objdump")
    assert objdump, "binutils' objdump is needed (it comes with the compiler llama.cpp needs)"
    import llama_cpp

    libs = sorted((Path(llama_cpp.__file__).parent / "lib").glob("*.so"))
    assert any(p.name == "libggml-cpu.so" for p in libs), libs

    def beyond(path: Path) -> int:
        asm = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(path)],
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout
        return len(BEYOND_AVX2.findall(asm))

    # the check itself finds AVX-512 where there is some: an object compiled for it
    probe = tmp_path / "probe.o"
    subprocess.run(
        ["cc", "-O3", "-mavx512f", "-mprefer-vector-width=512", "-c", "-x", "c", "-", "-o",
         str(probe)],
        input="void f(float*a,float*b){for(int i=0;i<256;i++)a[i]=a[i]*2+b[i];}",
        text=True,
        check=True,
    )  # fmt: skip
    assert beyond(probe) > 0
    assert {p.name: beyond(p) for p in libs} == {p.name: 0 for p in libs}
