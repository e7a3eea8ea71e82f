"""Red team round 86 (the GPU path, reasoned and shown on the judge's own functions): work that torch or a closed
library did, paid as the submission's.

- A timed call ran torch's fused RMSNorm (an `at::native` kernel, no vendor name) beside an own spin of 12 % of its
  time: the decoy rule's 10 % share was met and torch's speed paid. Now any kernel that no operator the task allows
  launches is `torch_kernel`, in the worker's profile and in the evidence pass (`profile.unexplained_kernel`).
- cuFFT's `regular_fft` and cuDNN's `implicit_convolve_sgemm` had no library's name: now `library_kernel`, and no own
  kernel may be named so.
- A module registered in sys.modules beside a planted `kernel-names.txt` made the worker count torch's kernels as its
  own: a library a worker built is read by cuobjdump only (`profile.inspected_kernel_names`).
"""

from __future__ import annotations

import pytest
import torch

from kerneldojo.graders.checks import Flagged
from kerneldojo.graders.evidence import check_own_names, decide, figures
from kerneldojo.graders.profile import (
    KERNEL_NAMES,
    KernelInterval,
    OwnKernels,
    inspected_kernel_names,
    library_kernel,
    native_kernel_names,
    summarize_profile,
    unexplained_kernel,
)
from kerneldojo.judge import _check_timing
from kerneldojo.result import CaseTiming, TimeStats
from kerneldojo.tasks import get_task
from kerneldojo.tasks.spec import DEFAULT_ALLOWED_OPS

RMS_NORM = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
            "(int, float, float const*)")
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
        "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
CAST = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
        "{lambda()#3}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float)")
# as the H200's torch 2.11 and its ncu spell them (ncu drops `native::`; arange's kernel is in an anonymous namespace)
ARANGE = ("void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(...)::"
          "{lambda(long)#1}>(int, function_traits<long>::result_type*)")
NCU_FILL = "void at::vectorized_elementwise_kernel<4, at::FillFunctor<float>, std::array<char *, 1>>(int, T2, T3)"


def _timed(task_id: str, kernels: list[tuple[str, int]], own: set[str], data_bytes: int = 1 << 30,
           host_ns: int = 0) -> None:
    """`_check_timing` on one call whose kernels ran back to back, (name, ns) each, `host_ns` more on the host, of
    a case whose inputs and outputs are `data_bytes`."""
    intervals, start = [], 0
    for name, ns in kernels:
        intervals.append(KernelInterval(name, 7, start, start + ns))
        start += ns
    profile = summarize_profile(intervals, calls=1, own_kernels=OwnKernels(native=own))
    ms = (start + host_ns) / 1e6
    stats = TimeStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0, runs=10)
    _check_timing(get_task(task_id), CaseTiming(case="n=1", submission=stats, profile=profile), None, data_bytes)


def test_torchs_fused_kernel_beside_an_own_spin_is_torch_kernel():
    spin = [(RMS_NORM, 880_000), ("spin", 120_000)]  # 12 %: the decoy rule alone let it through
    with pytest.raises(Flagged) as flagged:
        _timed("rmsnorm", spin, {"spin"})
    assert set(flagged.value.checks) == {"torch_kernel"}
    launches = [{"Kernel Name": n, "gpu__time_duration.sum": ns / 1e6} for n, ns in spin]
    found = figures(launches, OwnKernels(triton={"spin"}), get_task("rmsnorm").allowed_ops)
    assert found.own_share == pytest.approx(0.12)
    assert set(decide(found, 1.0, "case", vendor_forbidden=True, decoy_forbidden=True)) == {"torch_kernel"}


def test_the_default_operators_kernels_are_explained_and_honest_profiles_pass():
    for name in (FILL, NCU_FILL, CAST, ARANGE, "Memcpy DtoD (Device -> Device)", "Memset (Device)"):
        assert not unexplained_kernel(name, DEFAULT_ALLOWED_OPS), name
    _timed("rmsnorm", [(FILL, 5_000), (CAST, 5_000), (ARANGE, 1_000), ("rms_kernel", 900_000)], {"rms_kernel"})
    # a task that forbids copies (its work is one) does not explain torch's copy kernels
    assert unexplained_kernel(CAST, get_task("transpose").allowed_ops)
    with pytest.raises(Flagged, match="torch_kernel"):
        _timed("transpose", [(CAST, 900_000), ("transpose_kernel", 120_000)], {"transpose_kernel"})


def test_a_task_allowing_operators_beyond_the_defaults_keeps_the_share_rule():
    from kerneldojo.judge import LIBRARY_OPS

    allowed = DEFAULT_ALLOWED_OPS | LIBRARY_OPS  # an adapted KernelBench problem
    found = figures([{"Kernel Name": RMS_NORM, "gpu__time_duration.sum": 0.9},
                     {"Kernel Name": "own", "gpu__time_duration.sum": 0.1}], OwnKernels(triton={"own"}), allowed)
    assert found.unexplained == [RMS_NORM[:60]]
    assert decide(found, 1.0, "case", vendor_forbidden=False, decoy_forbidden=False,
                  torch_forbidden=allowed <= DEFAULT_ALLOWED_OPS) == {}


@pytest.mark.parametrize("name", ["void regular_fft<256u, EPT<8u>, 32u, 16u>(float2*, float2 const*)",
                                  "void vector_fft<128u>(float2*)",
                                  "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false>(int)"])
def test_closed_library_kernels_are_a_librarys(name):
    assert library_kernel(name) and name not in OwnKernels(native={"regular_fft", "vector_fft",
                                                                   "implicit_convolve_sgemm"})
    from kerneldojo.graders.profile import kernel_base_name
    from kerneldojo.sandbox.protocol import CompileError

    with pytest.raises(CompileError, match="look like a vendor library"):
        check_own_names({kernel_base_name(name)})


def test_a_list_planted_beside_a_library_the_worker_built_is_not_read(tmp_path, monkeypatch):
    library = tmp_path / "ext.so"
    library.write_bytes(b"\x7fELF not a real library")
    (tmp_path / KERNEL_NAMES).write_text("softmax_warp_forward regular_fft\n")
    monkeypatch.setattr("kerneldojo.sandbox.device.cuda_tool", lambda name: "/bin/true")  # a cuobjdump listing nothing
    assert native_kernel_names.__wrapped__(library) == {"softmax_warp_forward", "regular_fft"}  # the judge's builds
    assert inspected_kernel_names.__wrapped__(library) == frozenset()  # what the worker uses for its own builds
    source = (__import__("pathlib").Path(__file__).parents[2] / "sandbox" / "worker" / "harness.py").read_text()
    runtime = source.split("def _own_kernels(self)", 1)[1].split("\n    def ", 1)[0]
    assert "inspected_kernel_names(library)" in runtime and "native_kernel_names" not in runtime


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_every_default_operators_kernel_on_the_gpu_is_explained():
    """The names above are torch's as this machine's torch spells them: every default operator that writes elements,
    run under the profile, launches only kernels the rule explains (a false `torch_kernel` on honest code otherwise)."""
    from kerneldojo.graders.profile import profile_calls

    device = torch.device("cuda")
    x = torch.randn(1000, 33, device=device)
    calls = [lambda: torch.zeros(1000, device=device), lambda: torch.ones(7, 5, device=device),
             lambda: torch.full((300,), 2.5, device=device), lambda: x.new_zeros(100).fill_(3),
             lambda: torch.arange(1000, device=device), lambda: x.t().contiguous(), lambda: x.clone(),
             lambda: x.to(torch.bfloat16), lambda: x.half().float(), lambda: x.to(torch.int32),
             lambda: torch.empty_like(x).copy_(x.t().t()), lambda: x[:, 1:].contiguous(), lambda: x[0, 0].item()]
    for call in calls:
        call()
    kernels = profile_calls(calls, device, 1 << 20)
    names = {k.name for k in kernels}
    assert names, "the profile saw no kernel"
    assert [n for n in names if unexplained_kernel(n, DEFAULT_ALLOWED_OPS)] == []


# Red team round 87: the default operators' kernels by whole names (`.*fill_kernel` matched masked_fill's), copies to
# and from the host as a share of the paid time (the answer computed in numpy beside an own padding kernel), every
# kernel not the submission's in the worker's profile (not only the largest twelve), and a planted module's path
# resolved before it is told from the installation's.
MASKED_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::masked_fill_kernel"
               "(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda(float, bool)#1}, "
               "std::array<char*, 3ul> >(int, float)")
INDEX_COPY = "void at::native::index_elementwise_kernel<128, 4, at::native::index_copy_kernel_impl<float>(int)>(long)"
INDEX_FILL = "void at::index_elementwise_kernel<128, 4, at::native::index_fill_kernel_impl<float>(float)>(long)"


@pytest.mark.parametrize("name", [MASKED_FILL, INDEX_COPY, INDEX_FILL])
def test_a_kernel_named_beside_a_default_operators_is_not_one(name):
    assert unexplained_kernel(name, DEFAULT_ALLOWED_OPS)
    with pytest.raises(Flagged, match="torch_kernel"):
        _timed("relu", [(name, 900_000), ("relu_kernel", 100_000)], {"relu_kernel"})


def test_the_answer_computed_on_the_host_beside_a_padding_kernel_is_host_copy():
    """64 MB of data in and out: a quarter of it over the fastest host link takes 19 µs; the copies out and back
    took 450 µs each over PCIe."""
    host = [("Memcpy DtoH (Device -> Pageable)", 450_000), ("pad", 110_000), ("Memcpy HtoD (Pageable -> Device)",
                                                                            450_000)]
    for host_ns in (0, 30_000_000):  # round 88: sleeping on the host made a bound relative to the paid time pass
        with pytest.raises(Flagged) as flagged:
            _timed("softmax", host, {"pad"}, data_bytes=64 << 20, host_ns=host_ns)
        assert set(flagged.value.checks) == {"host_copy"}  # the pad met the decoy share: 11 % of the busy time
    for name in ("Memcpy HtoA (Pageable -> Array)", "Memcpy AtoH (Array -> Pageable)",
                 "Memcpy HtoH (Pinned -> Pinned)"):
        with pytest.raises(Flagged, match="host_copy"):
            _timed("softmax", [(name, 900_000), ("pad", 110_000)], {"pad"}, data_bytes=64 << 20)
    _timed("softmax", [("Memcpy PtoP (Device -> Device)", 10_000), ("softmax_kernel", 900_000)], {"softmax_kernel"})
    # an honest kernel that reads one value back (`.item()`) or uploads a small table
    _timed("row_sum", [("partial_sums", 150_000), ("Memcpy DtoH (Device -> Pinned)", 2_000), ("finish", 50_000),
                       ("Memcpy HtoD (Pageable -> Device)", 3_000)], {"partial_sums", "finish"})


def test_a_torch_kernel_below_twelve_own_ones_is_still_checked():
    own = [(f"own_{i}", 100_000) for i in range(13)]
    with pytest.raises(Flagged, match="torch_kernel"):
        _timed("rmsnorm", [*own, (RMS_NORM, 50_000)], {name for name, _ in own})


def test_a_planted_modules_path_is_resolved_and_must_be_in_a_folder_the_worker_writes(monkeypatch, tmp_path):
    import os
    import sys
    import types

    from kerneldojo.sandbox.worker.harness import _extensions_built_here

    installed, scratch = os.path.realpath(sys.prefix), os.path.realpath(tmp_path)
    for spelling in ("/" + installed + "/lib/planted.so", installed + "/./lib/planted.so",
                     installed + "/lib/../lib/planted.so", "/usr/local/cuda/lib64/libnpps.so",
                     scratch + "/../elsewhere/x.so", scratch + "_sibling/x.so"):
        module = types.ModuleType("planted")
        module.__file__ = spelling
        monkeypatch.setitem(sys.modules, "planted", module)
        assert _extensions_built_here((scratch,)) == [], spelling
    module.__file__ = scratch + "/ext/built_here.so"
    assert _extensions_built_here((scratch,)) == [scratch + "/ext/built_here.so"]
    assert _extensions_built_here((scratch,), (scratch + "/ext",)) == []  # a folder on the path, under scratch


def test_a_third_party_librarys_kernels_are_its_own_through_its_public_imports(tmp_path, monkeypatch):
    """Red team round 89: only the file an import names was read, so Liger-Kernel's kernels imported the way its
    documentation says (`from liger_kernel.ops import LigerRMSNormFunction`, re-exported from its own modules) were
    not the submission's, and an honest call was flagged `decoy_kernel` and `torch_kernel`."""
    import sys

    from kerneldojo.graders.profile import triton_kernel_names

    pytest.importorskip("liger_kernel")
    direct = triton_kernel_names("from liger_kernel.ops.rms_norm import rms_norm_forward\n")
    assert "_rms_norm_forward_kernel" in direct
    for source in ("from liger_kernel.ops import LigerRMSNormFunction\n", "import liger_kernel\n",
                   "from liger_kernel.transformers.functional import liger_rms_norm\n"):
        assert direct <= triton_kernel_names(source), source
    # a package's __init__ and a single-file module, neither named by the import's dotted path
    (tmp_path / "tlib").mkdir()
    (tmp_path / "tlib" / "__init__.py").write_text("import triton\n\n\n@triton.jit\ndef init_kernel(x):\n    pass\n")
    (tmp_path / "single.py").write_text("import triton\n\n\n@triton.jit\ndef single_kernel(x):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("tlib", None)
    assert triton_kernel_names("import tlib\nimport single\n") >= {"init_kernel", "single_kernel"}


def test_cublas_cutlass_kernels_are_a_librarys_whatever_stub_shares_their_base_name():
    """Red team round 90: cuBLAS's CUTLASS GEMMs are `cutlass::Kernel2<cutlass_80_...>`, base name `Kernel2`; an
    unlaunched own `Kernel2` made them the submission's (no vendor_kernel, no decoy). An honest CuTe kernel's
    `cutlass::device_kernel<...>` stays its own."""
    cublas = ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>"
              "(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)")
    assert cublas not in OwnKernels(native={"Kernel2"}) and library_kernel(cublas)
    # Round 91: CUTLASS 3's and CUTLASS 2's other generated spellings, under the entry points an own kernel may share.
    for generated, entry in (("cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_128x128x64_1x1x1_0_tnn_align8",
                              "device_kernel"), ("cutlass_tensorop_s1688tf32gemm_256x128_16x3_tt_align4", "Kernel"),
                             ("cutlass_simt_sgemm_128x128_8x2_nn_align1", "Kernel"),
                             ("cutlass_wmma_tensorop_h161616gemm_32x32_32x1_nn_align8", "Kernel")):
        name = f"void cutlass::{entry}<{generated}>({generated}::Params)"
        assert name not in OwnKernels(native={entry}) and library_kernel(name), generated
    honest = "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>>>(Params)"
    assert honest in OwnKernels(native={"device_kernel"})


def test_an_honest_load_inline_in_var_tmp_is_the_workers_own_and_package_walks_are_bounded(monkeypatch, tmp_path):
    import os

    from kerneldojo.graders import profile
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import Build
    from kerneldojo.sandbox.worker.harness import Solution

    source = tmp_path / "submission.py"
    source.write_text("def solution(x, y):\n    return x + y\n")
    solution = Solution(get_task("vector_add"), Build("python", source), resolve_device("cpu"))
    assert os.path.realpath("/var/tmp") in solution._writable
    pytest.importorskip("liger_kernel")
    profile._package_files.cache_clear()
    monkeypatch.setattr(profile, "PACKAGE_FILES_READ", 3)
    assert len(profile._package_files("liger_kernel")) == 3  # the walk stops at the bound
    assert profile._package_files("liger_kernel") is profile._package_files("liger_kernel")  # walked once
    profile._package_files.cache_clear()
