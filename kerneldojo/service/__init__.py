"""The judge as an HTTP service (judge side): `kerneldojo serve`, or `create_app(ServiceConfig(...))` under any
ASGI server. `config` (tokens, limits, where state lives), `jobs` (the persistent job queue over an
executor), `metrics` (Prometheus), `app` (the FastAPI routes). docs/service.md describes the API."""

from .config import ServiceConfig, TokenPolicy, load_tokens

__all__ = ["ServiceConfig", "TokenPolicy", "create_app", "load_tokens", "serve"]


def __getattr__(name: str):
    if name in ("create_app", "serve"):  # imported on use: FastAPI is the `serve` extra
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
