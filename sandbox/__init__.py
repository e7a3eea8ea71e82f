"""Where submission code runs: the device, the loader/runner, Triton's CPU interpreter."""
