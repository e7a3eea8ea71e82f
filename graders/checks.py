"""Anti-cheat checks: their names (what `EvalResult.checks_fired` records), the message each gives (what
was seen and what to do instead) and `Flagged`, which makes the status `flagged`.

The checks themselves live where their evidence is: the watches inside the worker in
`sandbox.worker.watches`; the ones that need the whole picture (same output, physical floor, the
profile) in `kerneldojo.judge`.
"""

from __future__ import annotations

MESSAGES = {
    "forbidden_op": "the submission called {detail}, which this task forbids; do the work in your own kernel",
    "reference_called": "the submission called the task's reference implementation; write the kernel yourself",
    "tampering": "the submission replaced {detail}, which the judge relies on; leave torch, time and the judge alone",
    "threads_left_running": "{detail} still running after the call returned; finish all work before returning",
    "not_a_tensor": "output {detail} is a torch.Tensor subclass; return plain tensors that hold the values",
    "excess_memory": "{detail}; this task forbids materialising intermediates that large",
    "same_output": "the outputs were identical for different inputs ({detail}); the result must depend on the inputs",
    "below_floor": "{detail} is under the physical floor for this work on this GPU; the timing cannot be real",
    "vendor_kernel": "library kernels ran ({detail}), which this task forbids; write the kernel yourself",
    "no_kernel": "no kernel ran in the timed calls ({detail}): the work was done on the host or not at all; "
                 "do it in your own kernel",
    "decoy_kernel": "{detail} of the GPU time was spent in kernels the submission did not compile",
    "host_copy": "{detail}: the data went through the host, where no kernel of yours did the work; keep it on "
                 "the GPU",
    "host_memory": "{detail}: the data went through host memory your kernels read or wrote directly (pinned, "
                   "mapped or zero-copy), where the host can do the work; keep inputs, outputs and scratch on the GPU",
    "torch_kernel": "kernels of PyTorch or a library ran that no operator this task allows launches ({detail}); "
                    "do the work in your own kernel",
    "unsynchronized_stream": "{detail}: work on another stream was not joined to the caller's stream before "
    "returning; make the caller's stream wait for it (an event, or synchronize)",
    "timing_channel": "{detail}; the worker's replies were out of order, as when a submission forges one",
    "evidence_wrong": "replayed under Nsight Compute, {detail}; a kernel must behave the same whoever watches",
    "evidence_failed": "the replay under Nsight Compute failed twice, from fresh seeds ({detail}); a kernel that "
    "passed the checked calls must run the same when replayed",
    "time_disagrees": "{detail}; the timing the worker reported cannot be right (a patched or hijacked timer?)",
}


def message(check: str, detail: str = "") -> str:
    return f"{check}: " + MESSAGES[check].format(detail=detail)


class Flagged(Exception):
    """An anti-cheat check fired; `checks` are their names."""

    def __init__(self, checks: dict[str, str]):
        super().__init__("\n".join(checks.values()))
        self.checks = checks
