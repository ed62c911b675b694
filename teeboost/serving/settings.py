"""What to serve and how: the ``[serving]`` table of the active party's config, and the
``teeboost serve`` flags that override it, made into the registry's model specs.

Keys (docs/configuration.md, generated from ``teeboost.deploy.config_schema``): ``listen``
("host:port"), ``models`` (name -> directory, or a list of directories: versions served at
once, the first by default), ``fallback_model`` (a served model's name: the fallback of every
other model; or a table model -> fallback), ``on_unmatched`` ("error" or "fallback"; or a
table model -> policy) and ``max_rows_per_request``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from .fallback import ON_UNMATCHED
from .registry import ModelSpec

__all__ = ["ServingSettings", "parse_listen", "model_specs", "DEFAULT_LISTEN"]

DEFAULT_LISTEN = "127.0.0.1:8080"


def parse_listen(text: str, where: str) -> tuple[str, int]:
    """'host:port' or '[v6 host]:port' -> (host, port); port 0 picks a free one."""
    host, sep, port = str(text).rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{where} = {text!r} must be 'host:port' (e.g. {DEFAULT_LISTEN!r}; port 0: any free port)")
    return host, int(port)


@dataclass(frozen=True)
class ServingSettings:
    listen: str = DEFAULT_LISTEN
    models: dict[str, tuple[Path, ...]] = field(default_factory=dict)
    fallback_model: str | dict[str, str] | None = None
    on_unmatched: str | dict[str, str] | None = None
    max_rows_per_request: int = 1000
    timeout: float = 2.0  # seconds a passive party has to answer an online request

    @classmethod
    def from_table(cls, table: dict, path: Path) -> "ServingSettings":
        """``[serving]`` of the config at ``path``; directories relative to the config."""
        where = f"{path}: [serving]"
        listen = table.get("listen", DEFAULT_LISTEN)
        if not isinstance(listen, str):
            raise ConfigError(f"{where} listen = {listen!r} must be a string 'host:port'")
        parse_listen(listen, f"{where} listen")
        models = table.get("models", {})
        if not isinstance(models, dict):
            raise ConfigError(f"{where} models must be a table of model name = \"directory\" (or a list of them)")
        dirs = {}
        for name, value in models.items():
            values = value if isinstance(value, list) else [value]
            if not values or not all(isinstance(v, str) and v for v in values):
                raise ConfigError(f"{where} models.{name} = {value!r} must be a directory, or a list of directories")
            dirs[name] = tuple(path.parent / v for v in values)
        timeout = table.get("timeout", 2.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600:
            raise ConfigError(f"{where} timeout = {timeout!r} must be a number of seconds in (0, 600]")
        rows = table.get("max_rows_per_request", 1000)
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ConfigError(f"{where} max_rows_per_request = {rows!r} must be an integer >= 1")
        fallback = _name_or_table(table.get("fallback_model"), f"{where} fallback_model", "a served model's name")
        on_unmatched = _name_or_table(table.get("on_unmatched"), f"{where} on_unmatched", "'error' or 'fallback'")
        for value in ([on_unmatched] if isinstance(on_unmatched, str) else (on_unmatched or {}).values()):
            if value not in ON_UNMATCHED:
                raise ConfigError(f"{where} on_unmatched = {value!r} must be 'error' or 'fallback'")
        return cls(listen, dirs, fallback, on_unmatched, rows, float(timeout))


def _name_or_table(value, where: str, what: str) -> str | dict[str, str] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return dict(value)
    raise ConfigError(f"{where} = {value!r} must be {what}, or a table of model name = {what}")


def model_specs(models: dict[str, tuple[Path, ...]], fallback: str | dict[str, str] | None,
                on_unmatched: str | dict[str, str] | None) -> list[ModelSpec]:
    """One spec per served model. A fallback named alone serves every other model; a model with
    a fallback sends its unscored rows there unless ``on_unmatched`` says "error"."""
    names = list(models)
    per_model = fallback if isinstance(fallback, dict) else {n: fallback for n in names if n != fallback}
    for name in [*(on_unmatched if isinstance(on_unmatched, dict) else {}), *per_model]:
        if name not in models:
            raise ConfigError(f"[serving]: {name!r} is not a served model (served: {', '.join(names) or 'none'})")
    specs = []
    for name, directories in models.items():
        own = per_model.get(name) if fallback is not None else None
        policy = on_unmatched.get(name) if isinstance(on_unmatched, dict) else on_unmatched
        specs.append(ModelSpec(name, tuple(directories), policy or ("fallback" if own else "error"), own))
    return specs
