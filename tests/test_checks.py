"""Each anti-cheat check: a submission or a record that makes it fire, and honest ones it ignores.

Checks that need a GPU's profile or timing are tested here on hand-built records; the exploit suite
(tests/adversarial) drives them end to end on the device."""

import pytest
import submissions as subs
import torch

from kerneldojo.graders.checks import Flagged
from kerneldojo.graders.profile import (
    KernelInterval,
    OwnKernels,
    _demangled_base,
    kernel_base_name,
    summarize_profile,
    without_harness_launches,
)  # fmt: skip
from kerneldojo.graders.timing import pool_size
from kerneldojo.judge import _check_same_output, _check_timing, _perturbed
from kerneldojo.result import CaseTiming, ProfileStats, TimeStats
from kerneldojo.sandbox.worker.watches import Tampering
from kerneldojo.tasks import get_task

FIRES = {
    "tampering": "import torch\ntorch.cuda.synchronize = lambda *a: None\n" + subs.VECTOR_ADD_TRITON,
    "threads_left_running": ("import threading, time\n" + subs.VECTOR_ADD_TRITON
                             + "\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"),
    "reference_called": ("from kerneldojo.tasks import get_task\n\ndef solution(x, y):\n"
                         "    return get_task('vector_add').reference.reference(x, y)\n"),
    "not_a_tensor": ("import torch\n\nclass Lazy(torch.Tensor):\n    pass\n\n"
                     "def solution(x, y):\n    return (x + y).as_subclass(Lazy)\n"),
}


@pytest.fixture(scope="module")
def judge():
    from kerneldojo.judge import Judge

    return Judge("cpu", limits={"load": 60, "run": 20})


@pytest.mark.parametrize("check", FIRES)
def test_check_fires_and_scores_below_an_honest_failure(judge, check):
    result = judge.evaluate("vector_add", FIRES[check], "python")
    assert result.status == "flagged" and check in result.checks_fired, result.messages
    assert result.reward < judge.reward.failure
    assert any(m.startswith(f"{check}: ") for m in result.messages)


def test_calling_the_exact_form_of_a_reference_is_flagged_too(judge):
    source = ("from kerneldojo.tasks import get_task\n\ndef solution(x, weight, bias):\n"
              "    return get_task('layernorm').reference.expected(x, weight, bias)\n")
    result = judge.evaluate("layernorm", source, "python")
    assert result.status == "flagged" and "reference_called" in result.checks_fired, result.messages


def test_a_child_process_is_refused_in_cpu_mode(judge):
    # The CPU worker's seccomp filter (sandbox/worker/syscall_filter.py); on a GPU, a child still alive after
    # the call is flagged threads_left_running (tests/adversarial/exploits/background_process.py).
    source = "import subprocess\n\ndef solution(x, y):\n    subprocess.Popen(['sleep', '30'])\n    return x + y\n"
    result = judge.evaluate("vector_add", source, "python")
    assert result.status == "runtime_error" and "Operation not permitted" in result.messages[0], result.messages


def test_forged_reply_is_caught(judge):
    # Finds the worker's reply channel and answers the run itself, before the harness does.
    source = '''
import gc
import sys

def solution(x, y):
    out = x + y
    for obj in gc.get_objects():
        if type(obj).__name__ == "WorkerEnd":
            frame = sys._getframe(1)
            while frame and "sequence" not in frame.f_locals:
                frame = frame.f_back
            obj.put((frame.f_locals["sequence"], "ok", (out,)))
    return out
'''
    result = judge.evaluate("vector_add", source, "python")
    assert result.status == "flagged" and result.checks_fired == ["timing_channel"], result.messages


def test_honest_threads_joined_before_return_are_fine(judge):
    source = subs.VECTOR_ADD_TRITON.replace("def solution(", "def add_all(") + (
        "\nimport threading\n\ndef solution(x, y):\n    got = []\n"
        "    t = threading.Thread(target=lambda: got.append(add_all(x, y)))\n    t.start()\n    t.join()\n"
        "    return got[0]\n")
    assert judge.evaluate("vector_add", source, "python").status == "ok"


def test_tampering_sees_a_replaced_function_and_nothing_else():
    watch = Tampering()
    assert watch.changed() == []
    original = torch.cuda.Event.elapsed_time
    try:
        torch.cuda.Event.elapsed_time = lambda self, other: 0.001
        assert watch.changed() == ["torch.cuda.Event.elapsed_time"]
    finally:
        torch.cuda.Event.elapsed_time = original
    assert watch.changed() == []


@pytest.mark.parametrize(("where", "attr"), [("L2Flush", "__call__"), ("HostGate", "open"),
                                             ("profile", "summarize_profile"), ("runner", "profile_calls")])
def test_tampering_sees_the_harness_flush_gate_and_profile_replaced(where, attr):
    from kerneldojo.graders import profile, timing
    from kerneldojo.sandbox.worker import harness as runner

    watch = Tampering(runner.guarded_here())
    owner = {"L2Flush": timing.L2Flush, "HostGate": timing.HostGate, "profile": profile, "runner": runner}[where]
    original = vars(owner)[attr]
    try:
        setattr(owner, attr, lambda *args, **kwargs: None)  # e.g. no L2 flush: the timed calls find their inputs in L2
        assert len(watch.changed()) == 1 and watch.changed()[0].endswith(f".{attr}")
    finally:
        setattr(owner, attr, original)
    assert watch.changed() == []


def test_tampering_sees_the_harness_kernels_launch_path_changed_and_not_their_caches_growing():
    """Red team round 104: an instance `run` on the L2 flush's `JITFunction` ran the submission's work in the flush's
    place. Whatever the object launches through is guarded: its instance's methods, its class's, what it holds."""
    from kerneldojo.sandbox.worker import harness as runner

    kernels = runner.harness_kernels()
    watch = Tampering(objects=kernels)
    flush = kernels["the L2 flush's kernel"]()
    assert watch.changed() == []
    flush.run = lambda *args, **kwargs: None
    try:
        shadowed = f"the L2 flush's kernel: {type(flush).__name__}.run shadowed by an instance attribute"
        assert shadowed in watch.changed()  # and wherever else Triton's own registries reach that kernel
    finally:
        del flush.run
    assert watch.changed() == []
    klass = type(kernels["the host gate's kernel"]())
    owner = next(k for k in klass.__mro__ if "__getitem__" in vars(k))
    original = vars(owner)["__getitem__"]
    try:
        owner.__getitem__ = lambda self, grid: None
        assert any(c.endswith("__getitem__ replaced") for c in watch.changed()), watch.changed()
    finally:
        owner.__getitem__ = original
    vars(flush).setdefault("_kerneldojo_test_entry", 1)  # a new scalar, as a cache's counter: not a change
    try:
        assert watch.changed() == []
    finally:
        del vars(flush)["_kerneldojo_test_entry"]


@pytest.mark.parametrize("how", ["pre_run_hook", "launch_hook", "cache_cleared"])
def test_tampering_sees_code_hooked_onto_the_harness_kernels_launches(how):
    """Red team round 105: a hook on the flush's own list, one on Triton's global launch hook, and the kernel's cache
    cleared (the next call makes a look-alike) each ran the submission's code at the flush's and the gate's launches."""
    from triton import knobs

    from kerneldojo.graders import timing
    from kerneldojo.sandbox.worker import harness as runner

    watch = Tampering(objects=runner.harness_kernels())
    hook, flush = (lambda *args, **kwargs: None), timing._flush_kernel()
    hooks = flush.pre_run_hooks if how == "pre_run_hook" else knobs.runtime.launch_enter_hook.calls
    try:
        if how == "cache_cleared":
            timing._flush_kernel.cache_clear()
            assert "the L2 flush's kernel: another JITFunction in its place" in watch.changed()
        else:
            hooks.append(hook)
            assert watch.changed() and "a list it holds has other items" in watch.changed()[0], watch.changed()
    finally:
        if hook in hooks:
            hooks.remove(hook)
    assert Tampering(objects=runner.harness_kernels()).changed() == []


def test_tampering_sees_triton_s_driver_replaced_and_not_an_honest_knob_setting():
    """Red team round 106: Triton's active driver, reached only through a module global that `JITFunction.run` names,
    set (or its `get_current_device` replaced) ran the submission's code at the flush's launch; and an honest knob
    setting (`knobs.language.fp32_default = "ieee"`) was flagged. A setting may change, code may not appear."""
    from triton import knobs
    from triton.runtime import driver

    from kerneldojo.sandbox.worker import harness as runner

    watch = Tampering(objects=runner.harness_kernels())
    previous = vars(driver)["_active"]
    driver.set_active(object())
    try:
        assert any("DriverConfig._active" in c for c in watch.changed()), watch.changed()
    finally:
        vars(driver)["_active"] = previous
    assert watch.changed() == []
    knobs.language.fp32_default = "ieee"
    try:
        assert watch.changed() == []
    finally:
        vars(knobs.language).pop("fp32_default", None)


def test_same_output_for_different_inputs():
    a, b = torch.zeros(4), torch.ones(4)
    seen = []
    _check_same_output(seen, (a,), (a,), "n=4", 1e-5)
    _check_same_output(seen, (b,), (b,), "n=4", 1e-5)  # different inputs, different outputs: silent
    with pytest.raises(Flagged, match="same_output"):
        _check_same_output(seen, (a.clone(),), (torch.full((4,), 2.0),), "n=4", 1e-5)
    _check_same_output([(a, a)], (a,), (a,), "n=4", 1e-5)  # the reference itself agrees: silent


def test_a_saturated_answer_is_not_the_same_output():
    """An honest GELU gives -0.0 for every x below about -5, where the reference's values differ but are both within
    the absolute tolerance of zero (-3e-7 and -1e-8): flagged once in about a hundred CPU-mode steps at n=1, and the
    perturbed last check could meet it at any n (red team round 52). Any other difference still counts, however
    small: a cached sum, and a cached cross-entropy loss that moved by less than atol."""
    zero, seen = (torch.tensor([-0.0]),), []
    _check_same_output(seen, zero, (torch.tensor([-3e-7]),), "n=1", 1e-5)
    _check_same_output(seen, zero, (torch.tensor([-1e-8]),), "n=1", 1e-5)
    assert len(seen) == 2  # kept for the next seed's outputs, filled with the previous answer
    for before, after, atol in ((5.0e7, 5.0e7 + 450, 1e-4), (10.25, 10.25 + 3e-5, 1e-4)):
        cached = (torch.tensor([before]),)
        with pytest.raises(Flagged, match="same_output"):
            _check_same_output([(cached, cached)], cached, (torch.tensor([after]),), "perturbed", atol)


def test_a_change_the_output_dtype_cannot_show_is_not_the_same_output():
    """sum_all's honest baseline at n=10^8 on an H200: the perturbed check moved the float32 sum near 5.6e7 (a unit
    in the last place of 4) by less than a few units, and the honest answer stayed bit for bit the same."""
    answer = (torch.tensor(5.6e7),)
    _check_same_output([(answer, answer)], answer, (torch.tensor(5.6e7 + 8),), "n=100000007", 1e-4, ulps=4)
    with pytest.raises(Flagged, match="same_output"):  # 25 units: a kernel computing it would have moved
        _check_same_output([(answer, answer)], answer, (torch.tensor(5.6e7 + 100),), "n=100000007", 1e-4, ulps=4)
    integers = (torch.tensor([7]),)  # integer outputs resolve every difference
    with pytest.raises(Flagged, match="same_output"):
        _check_same_output([(integers, integers)], integers, (torch.tensor([8]),), "bins=1", 0, ulps=4)
    with pytest.raises(Flagged, match="same_output"):  # between seeds, every difference counts (a constant answer)
        _check_same_output([(answer, answer)], answer, (torch.tensor(5.6e7 + 8),), "n=100000007", 1e-4)


def _timing(median_ms: float, profile: ProfileStats | None = None) -> CaseTiming:
    stats = TimeStats(median_ms=median_ms, mean_ms=median_ms, min_ms=median_ms, max_ms=median_ms, iqr_ms=0, runs=10)
    return CaseTiming(case="n=1", submission=stats, profile=profile)


def _profile(kernels: list[KernelInterval], own: set[str]) -> ProfileStats:
    return summarize_profile(kernels, calls=1, own_kernels=OwnKernels(native=own))


def test_below_floor_fires_only_under_half_the_datasheet_floor():
    task = get_task("vector_add")
    _check_timing(task, _timing(0.6), 1.0)
    with pytest.raises(Flagged, match="below_floor"):
        _check_timing(task, _timing(0.4), 1.0)


def test_work_the_events_missed_is_scored_and_flagged():
    side = [KernelInterval("void add_kernel<float>(float const*)", 7, 0, 2_000_000)]
    timing = _timing(0.01, _profile(side, {"add_kernel"}))
    assert timing.scored_ms == pytest.approx(2.0)
    with pytest.raises(Flagged, match="unsynchronized_stream"):
        _check_timing(get_task("vector_add"), timing, 0.001)
    joined = _timing(2.05, _profile(side, {"add_kernel"}))  # the caller's stream waited: events saw it all
    _check_timing(get_task("vector_add"), joined, 0.001)


def test_vendor_kernel_fires_where_the_task_forbids_library_math():
    gemm = [KernelInterval("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", 7, 0, 1_000_000),
            KernelInterval("my_gemm", 7, 1_000_000, 1_100_000)]
    timing = _timing(1.2, _profile(gemm, {"my_gemm"}))
    with pytest.raises(Flagged, match="vendor_kernel"):
        _check_timing(get_task("matmul"), timing, 0.1)
    _check_timing(get_task("vector_add"), _timing(1.2, _profile(gemm[1:], {"my_gemm"})), 0.1)


def test_decoy_fires_when_the_submission_kernels_did_little_of_the_work():
    work = [KernelInterval("void at::native::vectorized_elementwise_kernel<4>(int)", 7, 0, 1_000_000),
            KernelInterval("decoy", 7, 1_000_000, 1_010_000)]
    with pytest.raises(Flagged, match="decoy_kernel"):
        _check_timing(get_task("vector_add"), _timing(1.0, _profile(work, {"decoy"})), 0.01)
    honest = [KernelInterval("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
                             7, 0, 10_000),
              KernelInterval("add_kernel", 7, 10_000, 1_000_000)]
    _check_timing(get_task("vector_add"), _timing(1.0, _profile(honest, {"add_kernel"})), 0.01)


def test_profile_summary_counts_overlap_once_and_sums_streams():
    kernels = [KernelInterval("a", 1, 0, 1_000_000), KernelInterval("b", 2, 500_000, 1_500_000),
               KernelInterval("a", 1, 2_000_000, 3_000_000)]
    p = summarize_profile(kernels, calls=2, own_kernels=OwnKernels(native={"a"}))
    assert p.kernel_ms == pytest.approx(1.5) and p.busy_ms == pytest.approx(1.25)
    # the share is of the busy time in which only own kernels ran: 1.5 of 2.5 ms (b overlaps half of a's first run)
    assert p.launches_per_call == 1.5 and p.streams == 2 and p.own_share == pytest.approx(1.5 / 2.5)


def test_an_own_kernel_beside_other_work_adds_nothing_to_its_share_and_inductors_kernels_are_a_librarys():
    """Red team round 85 (reasoned on the judge's functions): a graph compiled by Inductor at import ran in the
    timed calls, and one-block spins of the submission's own on side streams beside it made 89 % of a summed share,
    none of the time: paid Inductor's speedup. The share is now of the time only own kernels ran, and Inductor's
    kernels are a library's (`vendor_kernel`), in the worker's profile and in the evidence pass's figures."""
    from kerneldojo.graders.evidence import decide, figures

    inductor = "triton_per_fused_add_native_layer_norm_0"
    work = [KernelInterval(inductor, 7, 0, 100_000)]
    spins = [KernelInterval("pad_spin", 8 + i, 1_000, 99_000) for i in range(8)]
    p = summarize_profile(work + spins, calls=1, own_kernels=OwnKernels(triton={"pad_spin"}))
    assert p.own_share == 0.0 and p.busy_ms == pytest.approx(0.1)
    assert [k.name for k in p.kernels if k.vendor] == [inductor]
    with pytest.raises(Flagged) as flagged:
        _check_timing(get_task("add_layernorm"), _timing(0.1, p), None)
    assert {"vendor_kernel", "decoy_kernel"} <= set(flagged.value.checks)
    replayed = figures([{"Kernel Name": inductor, "gpu__time_duration.sum": 0.1},
                        {"Kernel Name": "pad_spin", "gpu__time_duration.sum": 0.012}], OwnKernels(triton={"pad_spin"}))
    assert "vendor_kernel" in decide(replayed, 0.1, "case", vendor_forbidden=True, decoy_forbidden=True)


def test_copies_in_the_profile_count_as_device_time_that_is_not_the_submissions():
    """Red team round 43: the profile counted kernels only. A call that hid its work from the events (on another
    stream, waited for before the call returned, so done before the gate let the start event go) did it on the host
    in the profiled calls: copies there and back, a CPU add, and one padded kernel of its own, which made a 100 %
    own share and a busy time of the pad alone. Copies now count: busy time covers them, and they dilute the share."""
    pad = KernelInterval("add_kernel", 7, 4_000_000, 4_200_000)  # 0.2 ms, as its timed calls' events show
    host_work = [KernelInterval("Memcpy DtoH (Device -> Pageable)", 7, 0, 2_000_000),
                 KernelInterval("Memcpy HtoD (Pageable -> Device)", 7, 2_000_000, 3_000_000), pad]
    profile = _profile(host_work, {"add_kernel"})
    assert profile.busy_ms == pytest.approx(3.2) and profile.kernel_ms == pytest.approx(0.2)
    assert profile.own_share == pytest.approx(0.2 / 3.2) and profile.launches_per_call == 1
    timing = _timing(0.2, profile)
    assert timing.scored_ms == pytest.approx(3.2)  # paid the copies' time, whatever the events said
    with pytest.raises(Flagged, match="unsynchronized_stream") as flagged:
        _check_timing(get_task("vector_add"), timing, 0.1)
    assert "decoy_kernel" in flagged.value.checks
    only_copies = _profile(host_work[:2], {"add_kernel"})
    assert only_copies.own_share is None and only_copies.busy_ms == pytest.approx(3.0)  # `no_kernel`, as before
    honest = [KernelInterval("Memcpy DtoH (Device -> Pinned)", 7, 0, 2_000), KernelInterval("add_kernel", 7, 2_000,
                                                                                            1_000_000)]
    _check_timing(get_task("vector_add"), _timing(1.0, _profile(honest, {"add_kernel"})), 0.01)  # an .item()


def test_kernel_names_match_between_profile_and_cubin():
    assert kernel_base_name("void ns::add_kernel<float, 4>(float const*, float*, long)") == "add_kernel"
    assert kernel_base_name("softmax_kernel") == "softmax_kernel"
    # The function's own name, not its return type's (red team round 28: cuBLAS's gemvx kernel read as `enable_if`).
    assert kernel_base_name("std::enable_if<(bool)1, void>::type internal::gemvx::kernel<int, 7, false>"
                            "(cublasGemvParamsEx<int, float>)") == "kernel"
    assert kernel_base_name("void static_kernel<float>(float*)") == "static_kernel"
    assert _demangled_base("_Z10add_kernelPKfS0_Pfl") == "add_kernel"
    assert _demangled_base("_ZN2ns10add_kernelIfLi4EEEvPKfPfl") == "add_kernel"
    # An anonymous namespace (internal linkage, 'L'), as in the shipped CUDA matmul: named by the profile
    # "(anonymous namespace)::gemm_bf16<true>(...)"; once mistaken for a library kernel.
    anonymous = "_ZN46_GLOBAL__N__e129160d_13_submission_cu_solutionL9gemm_bf16ILb1EEEvPK13__nv_bfloat16S3_PS1_iiib"
    assert _demangled_base(anonymous) == "gemm_bf16"
    assert _demangled_base("_ZL10add_kernelPKfS0_Pfi") == "add_kernel"
    assert kernel_base_name("void (anonymous namespace)::gemm_bf16<true>(__nv_bfloat16 const*, int)") == "gemm_bf16"
    assert kernel_base_name("void <unnamed>::gemm_bf16<1>(const __nv_bfloat16 *, int)") == "gemm_bf16"  # ncu's


def test_timing_pool_covers_twice_the_l2_within_bounds():
    assert pool_size(1 << 20, 50 << 20) == 64  # small sets: capped
    assert pool_size(10 << 20, 50 << 20) == 10
    assert pool_size(4 << 30, 50 << 20) == 3  # large sets: at least three


def test_excess_memory_fires_above_the_tasks_scratch_bound_only():
    # The measurement itself needs a GPU (torch's peak-allocation counters); the rule is this.
    from types import SimpleNamespace

    from kerneldojo.sandbox.worker.harness import Solution

    task = get_task("flash_attention")
    shape = task.cases("test")[-1].shape
    bound = task.reference.max_scratch_bytes(shape)
    out = torch.empty(4, dtype=torch.bfloat16)
    solution = SimpleNamespace(task=task, build=SimpleNamespace(libraries={}), flags={})
    Solution._check_memory(solution, shape, (out,), bound + out.nbytes)  # at the bound: silent
    assert solution.flags == {}
    Solution._check_memory(solution, shape, (out,), bound + out.nbytes + 1)
    assert list(solution.flags) == ["excess_memory"] and "MiB" in solution.flags["excess_memory"]


def test_perturbed_call_moves_a_few_elements_within_each_inputs_own_values():
    torch.manual_seed(0)  # the positions are drawn from torch's generator: this test's draw, fixed
    fp8 = (2 * torch.randn(64, 70)).to(torch.float8_e4m3fn)
    scale = torch.tensor([0.03])
    strided = torch.randn(3, 4000, dtype=torch.bfloat16)[:, ::2]
    ints = torch.arange(4000, dtype=torch.int32) % 7
    moved = _perturbed((fp8, scale, strided, ints))
    for before, after in zip((fp8, scale, strided, ints), moved):
        assert after.dtype == before.dtype and after.shape == before.shape and after.stride() == before.stride()
        assert after.data_ptr() != before.data_ptr()
    changed = [(a.float() != b.float()).sum().item() for a, b in ((fp8, moved[0]), (strided, moved[2]))]
    assert all(1 <= c <= max(1, a.numel() // 1000) for c, a in zip(changed, (fp8, strided)))
    assert torch.equal(moved[1], scale)  # a scale: left alone
    # Integers too (red team round 43: a histogram's inputs), to values the input holds elsewhere: its range stays.
    assert 1 <= (moved[3] != ints).sum().item() <= 4 and set(moved[3].tolist()) <= set(ints.tolist())
    # Values stay in the input's range (the fp8 scale of the output depends on it: +0.5 on a 0.03 scale did not).
    assert moved[0].float().abs().max() <= fp8.float().abs().max() + fp8.float().std()


def test_the_harness_launches_are_left_out_of_the_profile_and_cannot_hide_work():
    def k(name, start, length=10):
        return KernelInterval(name, 7, start, start + length)

    flushes = {"kerneldojo_flush_l2": 2, "kerneldojo_align_ranks": 2}
    window = [k("kerneldojo_flush_l2", 0), k("kerneldojo_align_ranks", 10), k("push", 20), k("kerneldojo_flush_l2", 30),
              k("kerneldojo_align_ranks", 40), k("kerneldojo_align_ranks", 50), k("sum", 60)]
    kept = without_harness_launches(window, flushes)
    # a submission's kernel of the align's name: one launch too many, so every launch of that name counts
    assert [x.start_ns for x in kept] == [10, 20, 40, 50, 60]
    assert without_harness_launches(window[2:3], flushes) == window[2:3]
    assert without_harness_launches(window[:1], flushes) == []  # fewer than made (a record lost): all the harness's
    # Red team round 103: a short kernel of the submission's named like the harness's, beside longer harness launches
    # that overlap other work, was left out in their place; now no launch of the name is left out.
    disguised = k("kerneldojo_flush_l2", 100, length=5)
    assert {x.start_ns for x in without_harness_launches([*window, disguised], flushes)} >= {0, 30, 100}


def test_the_harness_own_ops_run_with_no_submission_mode_but_may_push_their_own():
    from torch.overrides import TorchFunctionMode

    from kerneldojo.sandbox.worker.watches import mode_depths, no_submission_hooks

    class Doubles(TorchFunctionMode):  # a mode a submission left pushed: it would see the refills
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            return result * 2 if func is torch.ones else result

    with Doubles():
        depths = mode_depths()
        with no_submission_hooks():
            assert torch.ones(2).tolist() == [1.0, 1.0]  # the leftover mode sees nothing
            with torch.device("meta"):  # a problem's make_inputs may use its own device context (a function mode)
                assert torch.ones(2).device.type == "meta"
        assert mode_depths() == depths and torch.ones(2).tolist() == [2.0, 2.0]  # put back as it was


def test_each_profiled_call_ends_before_the_next_is_let_onto_the_gpu(monkeypatch):
    """Red team round 100: the profiled calls were queued behind one gate, back to back, so work a call left on a
    stream of its own overlapped the next calls' and counted once in the busy time for several calls (paid 1.5x
    under its time). Each call is now gated, then the device synchronized, as in the timed loop."""
    import contextlib

    from kerneldojo.graders import profile as profile_mod
    from kerneldojo.graders import timing

    order = []

    class Gate:
        def __init__(self, device):
            pass

        def close(self):
            order.append("gate closed")

        def open(self):
            order.append("gate opened")

    class Record:
        def events(self):
            return []

    @contextlib.contextmanager
    def profiled(activities):
        yield type("Profile", (), {"profiler": type("Inner", (), {"kineto_results": Record()})()})()

    monkeypatch.setattr(timing, "HostGate", Gate)
    monkeypatch.setattr(timing, "L2Flush", lambda device, l2_bytes: lambda: order.append("flush"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: order.append("synchronize"))
    monkeypatch.setattr(torch.profiler, "profile", profiled)
    calls = [lambda k=k: order.append(f"call {k}") for k in range(3)]
    assert profile_mod.profile_calls(calls, torch.device("cpu"), 0) == []
    each = ["gate closed", "flush", "call {}", "gate opened", "synchronize"]
    assert order == ["synchronize"] + [step.format(k) for k in range(3) for step in each]


def test_a_noisy_kernel_may_repeat_within_its_own_error():
    """sum_all's atomic starter on an H200: its answers sit hundreds away from the reference's at n=10^8, and after
    the perturbed check moved the reference's sum by about 130 its answer was bit for bit the same. Within twice the
    error it showed on the seeds, a repeat is its rounding; beyond it, still a cache."""
    answer = (torch.tensor(5.6e7),)
    _check_same_output([(answer, answer)], answer, (torch.tensor(5.6e7 + 128),), "n=100000007", 1e-4, ulps=4,
                       noise=2 * 300.0)
    with pytest.raises(Flagged, match="same_output"):  # a kernel exact on its seeds gets no such room
        _check_same_output([(answer, answer)], answer, (torch.tensor(5.6e7 + 128),), "n=100000007", 1e-4, ulps=4,
                           noise=0.0)
    with pytest.raises(Flagged, match="same_output"):
        _check_same_output([(answer, answer)], answer, (torch.tensor(5.6e7 + 1000),), "n=100000007", 1e-4, ulps=4,
                           noise=2 * 300.0)
