"""The compiler runs confined as a worker is (`sandbox/worker/compiler.py`): its root is the allowlist, so an
`#include` of a file the judge can read finds nothing, and honest CUDA still builds."""

import os
import shutil
from pathlib import Path

import pytest
import submissions as subs

from kerneldojo.graders import compile as compile_mod
from kerneldojo.sandbox.protocol import CompileError
from kerneldojo.tasks import get_task

pytestmark = pytest.mark.skipif(compile_mod.cuda_tool("nvcc") is None, reason="no nvcc here")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELDOJO_CACHE", str(tmp_path / "cache"))  # build, not reuse


def _confined() -> bool:
    """Whether this kernel lets the compiler have a root of its own (else builds run as before, and say so)."""
    folder = Path(os.environ["KERNELDOJO_CACHE"])
    folder.mkdir(parents=True, exist_ok=True)
    import subprocess

    done = subprocess.run(compile_mod.confined("/bin/true", [], folder), capture_output=True, text=True, cwd=folder)
    return '"filesystem": "read-only' in done.stderr


def test_an_include_of_a_judge_file_finds_nothing(fresh_cache):
    if not _confined():
        pytest.skip("no mount namespace here: the compiler runs with the judge's view of the file system")
    repo = Path(__file__).resolve().parent.parent
    token = repo / f".kerneldojo-build-token-{os.getpid()}"
    token.write_text("int leaked_judge_token = 12345;\n")
    try:
        for path in (token, Path("/etc/shadow")):
            source = f'#include "{path}"\n' + subs.VECTOR_ADD_CUDA
            with pytest.raises(CompileError) as raised:
                compile_mod.compile_submission(get_task("vector_add"), source, "cuda", "90")
            assert "cannot open source file" in str(raised.value) or "No such file" in str(raised.value), raised.value
            assert "12345" not in str(raised.value) and "root:" not in str(raised.value)
    finally:
        token.unlink()


def test_a_build_cache_inside_an_allowlisted_folder_still_confines_the_build(fresh_cache, monkeypatch):
    """Red team round 95: the build ran in a folder beside its library in the cache; a cache inside a folder the
    root keeps (here one of the package's own folders) made that root impossible, and nvcc ran with the judge's
    whole file system in view: an `#include` of /etc/shadow came back in the compile error. Builds run in the
    judge's temporary folder now, wherever the cache is."""
    if not _confined():
        pytest.skip("no mount namespace here: the compiler runs with the judge's view of the file system")
    inside = Path(compile_mod.__file__).resolve().parent / f".kerneldojo-cache-test-{os.getpid()}"
    monkeypatch.setenv("KERNELDOJO_CACHE", str(inside))
    try:
        source = '#include "/etc/shadow"\n' + subs.VECTOR_ADD_CUDA
        with pytest.raises(CompileError) as raised:
            compile_mod.compile_submission(get_task("vector_add"), source, "cuda", "90")
        assert "root:" not in str(raised.value)
        assert "cannot open source file" in str(raised.value) or "No such file" in str(raised.value), raised.value
        # And a build folder that does land inside (a TMPDIR there) fails closed: none of the compiler's output.
        import tempfile

        monkeypatch.setattr(compile_mod, "build_folder", lambda: tempfile.TemporaryDirectory(dir=inside))
        with pytest.raises(compile_mod.TransientCompileError) as refused:
            compile_mod.compile_submission(get_task("vector_add"), source + "// again\n", "cuda", "90")
        assert "could not be confined" in str(refused.value) and "root:" not in str(refused.value)
    finally:
        shutil.rmtree(inside, ignore_errors=True)


def test_honest_cuda_still_builds_and_is_copied_out(fresh_cache, monkeypatch):
    bundled = Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin"
    if compile_mod.cuda_tool("cuobjdump") is None and (bundled / "cuobjdump").exists():  # Triton ships one
        monkeypatch.setenv("PATH", f"{bundled}:{os.environ['PATH']}")
    build = compile_mod.compile_submission(get_task("vector_add"), subs.VECTOR_ADD_CUDA, "cuda", "90")
    library = next(iter(build.libraries.values()))
    assert library.is_file() and not library.is_symlink() and library.stat().st_size > 0
    assert not [p for p in library.parent.iterdir() if p.is_dir()]  # the build folder is gone
    # Its kernels were listed by cuobjdump inside the build's confinement, so the judge never parses the binary.
    listed = library.with_name(compile_mod.KERNEL_NAMES).read_text()
    if compile_mod.cuda_tool("cuobjdump"):
        from kerneldojo.graders.profile import native_kernel_names

        assert "add" in listed.split(), listed
        assert "add" in native_kernel_names(library)
    else:
        assert listed.startswith(compile_mod.INSPECT_FAILED)


@pytest.mark.skipif(shutil.which("nm") is None, reason="no nm here")
def test_a_library_that_exports_no_solution_is_refused_and_not_cached(fresh_cache):
    source = subs.VECTOR_ADD_CUDA.replace('extern "C"', "").replace("solution(", "solution_v2(")
    with pytest.raises(CompileError, match="does not export `solution`"):
        compile_mod.compile_submission(get_task("vector_add"), source, "cuda", "90")
    assert not list(Path(os.environ["KERNELDOJO_CACHE"]).rglob("submission.so"))


def test_a_symlink_left_as_the_library_is_not_followed(tmp_path):
    (tmp_path / "secret").write_text("judge secret")
    (tmp_path / "submission.so").symlink_to(tmp_path / "secret")
    with pytest.raises(CompileError, match=r"no library|not a regular file"):
        compile_mod.copy_out(tmp_path / "submission.so", tmp_path / "out.so")
    assert not (tmp_path / "out.so").exists()


def _doubling_warnings(n: int) -> str:
    """A source that makes nvcc print 2^n warnings, each quoting the expanded line (red team round 8)."""
    lines = ["#define A0 {int v;}"] + [f"#define A{i} A{i - 1} A{i - 1}" for i in range(1, n + 1)]
    return "\n".join(lines) + f"\nstatic void f(){{ A{n} }}\n" + (
        'extern "C" void solution(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {}\n')


def test_a_build_that_prints_without_end_is_stopped_and_its_output_kept_bounded(fresh_cache):
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CompileError) as raised:
        compile_mod.compile_submission(get_task("vector_add"), _doubling_warnings(12), "cuda", "90")
    text = str(raised.value)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert "the build was stopped" in text, text[-2000:]
    assert len(text) < 200_000 and grown_mib < 200, (len(text), grown_mib)
    # the source's doing, stored like any compile error; not a kill from outside (which is not)
    assert not isinstance(raised.value, compile_mod.TransientCompileError), text[-500:]


def test_a_diagnostic_that_quotes_a_kill_or_a_full_disk_is_the_sources_error(tmp_path):
    """Red team round 118: `#error killed by signal 9` (or `No space left on device`) in the compiler's output made the
    build a transient error, never stored, rebuilt at every resubmission: only a driver's own line counts."""
    for text in ("x.cu(1): error: #error killed by signal 9", "x.cu(1): error: #error No space left on device"):
        code, output = compile_mod.run_confined("/bin/sh", ["-c", f"echo '{text}'; exit 2"], tmp_path, "a build", "sh")
        assert code == 2 and text in output


def test_a_compiler_killed_from_outside_is_the_machines_failure(tmp_path):
    """The processes between the judge and the compiler mirror a SIGKILL (they reported exit code 70: resetting
    SIGKILL's handler raised), so a build the OOM killer or an operator stopped is not stored as the source's."""
    with pytest.raises(compile_mod.TransientCompileError, match="was killed"):
        compile_mod.run_confined("/bin/sh", ["-c", "kill -9 $$"], tmp_path, "a test build", "sh")


def test_a_build_reads_no_input_of_the_judges(fresh_cache):
    """`#include "/dev/stdin"` read the judge's input (red team round 8): a build's stdin is /dev/null, and it
    has no terminal (no /dev/tty in its /dev)."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"#error JUDGE_INPUT_REACHED\n")
    os.close(write_end)
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        for device in ("/dev/stdin", "/dev/tty"):
            try:
                compile_mod.compile_submission(get_task("vector_add"), f'#include "{device}"\n' + subs.VECTOR_ADD_CUDA,
                                               "cuda", "90")
            except CompileError as e:
                assert "JUDGE_INPUT_REACHED" not in str(e), str(e)
        assert os.read(0, 100) == b"#error JUDGE_INPUT_REACHED\n"  # still unread
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)


def test_a_confined_tool_starts_with_the_allowlisted_environment(fresh_cache, monkeypatch):
    """Red team round 9: every confined tool (nvcc, the load_inline build) inherited the judge's whole environment,
    a service's KERNELDOJO_TOKENS among it. It starts with the worker's allowlist, in a cgroup where one can be made."""
    monkeypatch.setenv("KERNELDOJO_TOKENS", "kd-build-token-0123456789")
    monkeypatch.setenv("HF_TOKEN", "hf_build_secret")
    monkeypatch.setenv("SOME_UNLISTED_VARIABLE", "not-allowlisted")
    folder = Path(os.environ["KERNELDOJO_CACHE"])
    folder.mkdir(parents=True, exist_ok=True)
    returncode, output = compile_mod.run_confined("/usr/bin/env", [], folder, "the environment", "env")
    assert returncode == 0 and "PATH=" in output, output
    assert "kd-build-token" not in output and "hf_build_secret" not in output and "not-allowlisted" not in output


def test_a_build_over_its_own_memory_limit_is_the_sources_failure(tmp_path, monkeypatch):
    """Killed by the OOM killer at the build's own limit (a per-build cgroup's, which no load on the machine
    changes): a compile error stored like any, not the machine's; a kill from outside stays transient (above)."""
    from kerneldojo.sandbox import protocol

    if not _confined():
        pytest.skip("no confinement here")
    monkeypatch.setattr(protocol, "MEMORY_CAP_BYTES", 64 << 20)
    fill = "head -c 268435456 /dev/zero | tail -c 268435456 > /dev/null"  # tail holds what it may have to print
    code, output = compile_mod.run_confined("/bin/sh", ["-c", fill], tmp_path, "a test build", "sh")
    assert code != 0 and "ran out of host memory" in output, (code, output[-1000:])
