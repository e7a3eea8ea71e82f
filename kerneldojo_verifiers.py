"""The `kerneldojo-verifiers` taskset of verifiers 0.4, which imports a taskset id as a top-level module of that
name: kerneldojo/integrations/verifiers_env.py has it (`pip install kerneldojo[verifiers]`)."""

from kerneldojo.integrations.verifiers_env import KernelDojoEnv, KernelTaskset

__all__ = ["KernelDojoEnv", "KernelTaskset"]
