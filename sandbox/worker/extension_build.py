"""Builds one `load_inline` extension without loading it, confined (the judge's compile phase runs it as
`compiler.py ... -- python -I extension_build.py call.json`: `graders.extensions`).

`call.json` holds the call's arguments as the solution wrote them (its name replaced by the content-keyed
one, its build folder the confined folder itself) and the environment the build needs (CUDA_HOME,
TORCH_CUDA_ARCH_LIST, MAX_JOBS). torch writes `<name>.so` there; the judge copies it out. torch's own
import of the built module is replaced by nothing: no code of the submission runs here, only compilers.
A failure prints torch's message alone (no traceback of this file) and exits 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(call_file: str) -> int:
    call = json.loads(Path(call_file).read_text())
    os.environ.update(call["environ"])
    from torch.utils import cpp_extension

    cpp_extension._import_module_from_library = lambda *args, **kwargs: None  # build only
    if os.environ.get("CUDA_HOME") and cpp_extension.CUDA_HOME is None:
        cpp_extension.CUDA_HOME = os.environ["CUDA_HOME"]  # torch sets it at import from its own search
    try:
        cpp_extension.load_inline(**call["arguments"])
    except Exception as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
