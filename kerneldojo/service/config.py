"""The service's configuration: where it keeps state, what evaluates, and who may call it.

Tokens come from a TOML or JSON file (`--tokens FILE`, or `KERNELDOJO_TOKENS` holding a path or the
JSON itself). Each entry names a submitter; `secret` is the bearer token it sends
(`Authorization: Bearer <secret>`), or `secret_sha256` its hex digest so the file need not hold it:

    [tokens.alice]
    secret = "change-me"
    quota = 10000          # evaluations in all (the service's job log counts them across restarts)
    rate = 5.0             # requests per second, sustained
    burst = 20             # requests at once above the rate

    [tokens.ci]
    secret_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    quota = 500

The JSON form is the same object: `{"tokens": {"alice": {"secret": "...", "quota": 100}}}`.
Without a token file the service is open: every caller is `anonymous` with the default limits.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

DEFAULT_MAX_REQUEST_BYTES = 1 << 20  # a submission is at most 200,000 characters; a batch a few of them


@dataclass(frozen=True)
class TokenPolicy:
    name: str
    secret_sha256: str
    quota: int | None = None  # evaluations in all; None: no limit
    rate: float | None = None  # requests per second; None: no limit
    burst: int = 10


ANONYMOUS = TokenPolicy("anonymous", "")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class ServiceConfig:
    state_dir: Path = Path("kerneldojo-service")  # jobs.jsonl, and the store unless `store` says otherwise
    store: str | Path | None = None  # the ResultStore's target (.jsonl, .db, a URL); default state_dir/results.jsonl
    backend: str = "local"  # "local": the GPUPool of this host; "ray": judge actors on a Ray cluster
    devices: str = "auto"  # the local pool's devices (kerneldojo batch --devices)
    ray_address: str | None = None  # None: start or join a local Ray
    tokens: list[TokenPolicy] = field(default_factory=list)
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_batch: int = 1000  # submissions in one batch request
    in_flight: int | None = None  # jobs handed to the executor at once; default 2 per slot

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir)
        if self.store is not None and "://" not in str(self.store):  # a URL stays a string: Path squashes its //
            self.store = Path(self.store)

    @property
    def store_path(self) -> str | Path:
        return self.store or self.state_dir / "results.jsonl"

    def authenticate(self, secret: str | None) -> TokenPolicy | None:
        """The token's policy, ANONYMOUS when the service has no tokens, None for a wrong or missing one."""
        if not self.tokens:
            return ANONYMOUS
        if not secret:
            return None
        digest = _digest(secret)
        return next((t for t in self.tokens if hmac.compare_digest(t.secret_sha256, digest)), None)


def load_tokens(source: str | Path) -> list[TokenPolicy]:
    """From a TOML/JSON file, or JSON text (what KERNELDOJO_TOKENS may hold); ValueError names the problem."""
    text = str(source)
    if text.lstrip().startswith("{"):
        data, where = _parse_json(text, "KERNELDOJO_TOKENS"), "KERNELDOJO_TOKENS"
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"no such token file: {path}")
        where = str(path)
        if path.suffix == ".json":
            data = _parse_json(path.read_text(), where)
        else:
            try:
                data = tomllib.loads(path.read_text())
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"{where}: not valid TOML ({e})") from None
    entries = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(entries, dict) or not entries:
        raise ValueError(f"{where}: expected a [tokens.<name>] table per submitter")
    policies = []
    for name, entry in entries.items():
        if not isinstance(entry, dict) or ("secret" in entry) == ("secret_sha256" in entry):
            raise ValueError(f"{where}: token {name!r} needs one of secret or secret_sha256")
        unknown = set(entry) - {"secret", "secret_sha256", "quota", "rate", "burst"}
        if unknown:
            raise ValueError(f"{where}: token {name!r} has unknown field {', '.join(sorted(unknown))}")
        try:
            policies.append(TokenPolicy(
                name, entry.get("secret_sha256") or _digest(str(entry["secret"])),
                quota=None if entry.get("quota") is None else int(entry["quota"]),
                rate=None if entry.get("rate") is None else float(entry["rate"]), burst=int(entry.get("burst", 10)),
            ))  # fmt: skip
        except (TypeError, ValueError):
            raise ValueError(f"{where}: token {name!r}: quota and burst are integers, rate a number") from None
    return policies


def _parse_json(text: str, where: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e.msg})") from None


def tokens_from_env() -> list[TokenPolicy]:
    value = os.environ.get("KERNELDOJO_TOKENS")
    return load_tokens(value) if value else []
