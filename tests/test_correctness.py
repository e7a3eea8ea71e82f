import pytest
import torch

from kerneldojo.graders.correctness import (
    WrongOutput,
    check_inputs_unchanged,
    check_outputs,
    poisoned_like,
    same_layout_copy,
)
from kerneldojo.tasks import Tolerance, get_task

TOL = Tolerance(atol=1e-6, rtol=1e-6)


def test_equal_outputs_pass_and_report_the_max_error():
    ref = torch.randn(4, 5)
    got = ref.double() + 1e-7
    assert check_outputs((got.float(),), (ref,), TOL, "c") == pytest.approx(1e-7, rel=0.3)


def test_the_worst_element_is_located():
    ref = torch.randn(4, 5)
    got = ref.clone()
    got[2, 3] += 1.0
    got[1, 1] += 0.5
    with pytest.raises(WrongOutput, match=r"index \(2, 3\)") as info:
        check_outputs((got,), (ref,), TOL, "c")
    m = info.value.mismatch
    assert (m.index, m.mismatched, m.total) == ([2, 3], 2, 20)
    assert m.max_abs_error == pytest.approx(1.0)


def test_poison_left_unwritten_fails():
    ref = torch.randn(10)
    got = poisoned_like((ref,))[0]
    got[:9] = ref[:9]
    with pytest.raises(WrongOutput, match=r"unwritten or NaN at index \(9,\)"):
        check_outputs((got,), (ref,), TOL, "c")


def test_nan_passes_only_where_the_reference_has_it():
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    check_outputs((ref.clone(),), (ref,), TOL, "c")
    for bad in ([1.0, 0.0, float("inf")], [1.0, float("nan"), 1e30], [float("nan")] * 3):
        with pytest.raises(WrongOutput):
            check_outputs((torch.tensor(bad),), (ref,), TOL, "c")


@pytest.mark.parametrize(
    ("got", "message"),
    [
        (torch.zeros(3, dtype=torch.float64), "dtype torch.float64"),
        (torch.zeros(4), r"shape torch.Size\(\[4\]\)"),
        ([0.0, 0.0, 0.0], "is a list"),
        (torch.nn.Parameter(torch.zeros(3)), "is a Parameter"),
    ],
)
def test_output_structure_is_checked(got, message):
    with pytest.raises(WrongOutput, match=message):
        check_outputs((got,), (torch.zeros(3),), TOL, "c")


def test_wrong_number_of_outputs():
    with pytest.raises(WrongOutput, match="returned 2 output"):
        check_outputs((torch.zeros(3), torch.zeros(3)), (torch.zeros(3),), TOL, "c")


def test_modified_inputs_are_caught():
    before = (torch.randn(5),)
    after = (before[0].clone(),)
    check_inputs_unchanged(before, after, "c")
    after[0][3] = 0
    with pytest.raises(WrongOutput, match="input 0 was modified"):
        check_inputs_unchanged(before, after, "c")


def test_poison_is_nan_for_floats_and_min_for_ints():
    f, i = poisoned_like((torch.zeros(3), torch.zeros(3, dtype=torch.int32)))
    assert f.isnan().all() and (i == torch.iinfo(torch.int32).min).all()


@pytest.mark.parametrize("make", [
    lambda: torch.randn(6, 5)[1:, ::2],                 # an offset and a stride into a larger storage
    lambda: torch.randn(7, 1).expand(7, 4),             # stride 0: one element read by many
    lambda: torch.randn(3, 4).t(),                      # transposed
])
def test_a_copy_sent_to_a_worker_keeps_the_inputs_layout_and_shares_no_memory(make):
    """The judge sends workers copies of its inputs (made in `sandbox.device.exported_memory` on a GPU), so the
    copies must keep storage offset and strides: a task's inputs may be views on purpose."""
    t = make()
    copy = same_layout_copy(t)
    assert torch.equal(copy, t)
    assert (copy.shape, copy.stride(), copy.storage_offset()) == (t.shape, t.stride(), t.storage_offset())
    assert copy.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    original = t.clone()
    torch.empty(0, dtype=torch.uint8).set_(copy.untyped_storage()).fill_(0)  # a worker's writes land in its copy
    assert torch.equal(t, original) and not torch.equal(copy, t)


def test_a_sum_estimated_from_a_sample_fails_sum_all():
    """Red team round 43's note: with i.i.d. mean-0.5 inputs, summing 95 % of the elements and estimating the rest
    from their mean stayed within sum_all's rtol of 1e-4 at large n. The inputs' 64 large values at random places
    fail it; an honest float32 sum passes (exploit `sum_all_skip_estimate` on the GPU)."""
    task = get_task("sum_all")
    shape = {"n": 100000007, "dtype": "float32"}  # its largest test shape: at 1e6 the estimate's noise fails anyway
    for seed in range(2):
        (x,) = task.reference.make_inputs(shape, seed, "cpu")
        expected = (task.reference.reference(x),)
        read = int(x.numel() * 0.95)
        with pytest.raises(WrongOutput):
            check_outputs((x[:read].sum() * (x.numel() / read),), expected, task.tolerance("float32"), "sampled")
        check_outputs((x.sum(),), expected, task.tolerance("float32"), "honest")


def test_bool_complex_and_unsigned_outputs_are_poisoned_and_compared_whole():
    """Red team round 55: bool and complex outputs had no poison (every submission of such a problem failed, the
    reference itself included), the comparison kept a complex output's real part alone, and uint8's poison was 0, a
    common right answer."""
    expected = (torch.tensor([True, False]), torch.tensor([1 + 2j, 3 - 4j]), torch.tensor([0, 5], dtype=torch.uint8))
    poisoned = poisoned_like(expected)
    assert poisoned[0].all() and poisoned[1].isnan().all() and (poisoned[2] == 255).all()
    tol = Tolerance(atol=1e-5, rtol=1e-5)
    check_outputs(expected, expected, tol, "same")
    with pytest.raises(WrongOutput, match="output 1 differs"):
        check_outputs((expected[0], torch.tensor([1 + 2j, 3 + 4j]), expected[2]), expected, tol, "imaginary part")
    with pytest.raises(WrongOutput):
        check_outputs((torch.tensor([True, True]), *expected[1:]), expected, tol, "bool")
