"""A local sandbox image for CPU mode, made without a registry, in well under a second.

`sandbox/Dockerfile` builds the real image (CUDA, torch, Triton, CUTLASS, this package) for GPU
machines; it needs a registry for its base image. Where there is none (CI, a laptop), this module
makes a *skeleton* image instead: `docker import` of a tarball that holds only a few entries of /etc
(passwd and group with the sandbox user, the loader cache), the merged-/usr links, an empty
/tmp (mode 1777) and /sbin (where docker-init is mounted). Everything to run comes in as
read-only bind mounts of the host: /usr (the C library and friends), the Python installation
behind the running interpreter, its virtual environment, and this package's folders.

So the container sees the host's system software and this checkout read-only, nothing else of the
host: not /etc, /home, /root, the build cache or other submissions. That is the right trade for
tests; a deployment uses the self-contained image.

    python -m kerneldojo.sandbox.docker_image   # builds kerneldojo-sandbox:local, prints its config
"""

from __future__ import annotations

import io
import os
import sys
import tarfile
from pathlib import Path

from .docker import DockerConfig

LOCAL_TAG = "kerneldojo-sandbox:local"
SANDBOX_UID = 65534
# What a worker imports (the baselines and their benchmark scripts stay out of the image).
_PACKAGES = ("kerneldojo", "kerneldojo.env", "kerneldojo.tasks", "kerneldojo.sandbox", "kerneldojo.graders")


def skeleton_tar() -> bytes:
    """The image's whole content, as a tar archive (deterministic: fixed owners and times)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        def add(name: str, kind: bytes, mode: int, data: bytes = b"", target: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.linkname, info.size = kind, mode, target, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for folder in ("etc", "usr", "tmp", "sbin", "proc", "sys", "dev"):
            add(folder, tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755)
        for link in ("bin", "lib", "lib32", "lib64", "libx32"):  # merged /usr; absent ones are dangling
            if Path("/", link).is_symlink() or not Path("/", link).exists():
                add(link, tarfile.SYMTYPE, 0o777, target=f"usr/{link}")
        add("etc/passwd", tarfile.REGTYPE, 0o644,
            f"root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{SANDBOX_UID}:{SANDBOX_UID}::/tmp:/usr/sbin/nologin\n"
            .encode())
        add("etc/group", tarfile.REGTYPE, 0o644, f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\n".encode())
        cache = Path("/etc/ld.so.cache")
        if cache.is_file():  # where the host's libraries are; they are mounted at the same paths
            add("etc/ld.so.cache", tarfile.REGTYPE, 0o644, cache.read_bytes())
    return buffer.getvalue()


def host_mounts() -> tuple[tuple[str, str], ...]:
    """Read-only bind mounts that make the running interpreter and this package work inside."""
    import importlib

    paths = [Path("/usr")]
    paths += [Path("/", d) for d in ("lib", "lib32", "lib64", "libx32") if Path("/", d).is_dir()
              and not Path("/", d).is_symlink()]
    paths += [Path(sys.base_prefix), Path(sys.prefix)]
    paths += [Path(importlib.import_module(name).__file__).parent for name in _PACKAGES]
    # Packages the judge's environment adds (carried wheels on PYTHONPATH, for instance).
    paths += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).is_dir()]
    paths = sorted({p.resolve() for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for p in paths:  # a folder inside one already mounted needs no mount of its own
        if not any(p == k or k in p.parents for k in kept):
            kept.append(p)
    return tuple((str(p), str(p)) for p in kept)


def build_local_image(tag: str = LOCAL_TAG, force: bool = False, client=None) -> str:
    """Import the skeleton image under `tag` (unless it exists already) and return the tag."""
    import docker

    client = client or docker.from_env()
    if not force:
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
    repository, _, version = tag.rpartition(":") if ":" in tag else (tag, "", "latest")
    client.api.import_image_from_data(skeleton_tar(), repository=repository, tag=version)
    return tag


def local_config(tag: str = LOCAL_TAG, **overrides) -> DockerConfig:
    """The `DockerConfig` for the local image: this interpreter, its packages mounted read-only."""
    environment = (("PYTHONPATH", os.environ["PYTHONPATH"]),) if os.environ.get("PYTHONPATH") else ()
    settings = {"image": tag, "python": sys.executable, "mounts": host_mounts(), "user": f"{SANDBOX_UID}:{SANDBOX_UID}",
                "environment": environment}
    return DockerConfig(**{**settings, **overrides})


def main() -> None:
    tag = build_local_image(os.environ.get("KERNELDOJO_DOCKER_IMAGE", LOCAL_TAG), force="--force" in sys.argv)
    print(tag)
    print(local_config(tag))


if __name__ == "__main__":
    main()
