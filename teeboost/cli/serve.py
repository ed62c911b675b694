"""``teeboost serve``: the active party's online scoring service (HTTP/JSON, docs/serving.md).

Local model directories (``--model NAME=DIR``: every party's files, rows carry every column),
or (``--config ACTIVE.toml``) the active party's deployed models with its passive parties
online, scored by ``teeboost.serving.federated.FederatedScorer``. Flags override the config's
``[serving]`` table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError


def add_serve(sub) -> None:
    serve = sub.add_parser("serve", help="serve a model's predictions over HTTP/JSON (the active party's service)")
    serve.add_argument("--model", action="append", metavar="NAME=DIR",
                       help="serve the model in DIR as NAME; repeat for more models, or for more versions of one "
                            "name (the first answers requests that pin none)")
    serve.add_argument("--config", type=Path,
                       help="the active party's config: serve its models with its passive parties online "
                            "([serving] table; the flags here override it)")
    serve.add_argument("--fallback", metavar="NAME[=DIR]",
                       help="the model (trained on the active party's columns only) that scores rows the other "
                            "models could not; NAME=DIR serves DIR as NAME too")
    serve.add_argument("--fallback-for", action="append", metavar="MODEL",
                       help="the model whose rows the fallback answers; repeat for more (default: every other model)")
    serve.add_argument("--on-unmatched", choices=("error", "fallback"),
                       help="what a row the model could not score gets: an error saying why, or the fallback "
                            "model's score, flagged (default: fallback when there is a fallback model, else error)")
    serve.add_argument("--host", help="address to listen on (default: 127.0.0.1, or [serving] listen)")
    serve.add_argument("--port", type=int, help="port to listen on; 0 picks a free one (default: 8080, or [serving] "
                                                "listen)")
    serve.add_argument("--ready-file", type=Path,
                       help="once listening, write {\"url\", \"pid\", \"models\"} here (atomically); removed on exit")
    serve.add_argument("--max-rows", type=int, help="rows one request may carry (default: 1000, or [serving] "
                                                    "max_rows_per_request)")
    serve.add_argument("--allow-simulated-tee", action="store_true",
                       help="strict models: route rows between simulated enclaves (no hardware protection)")
    serve.add_argument("--access-log", action="store_true", help="log every request on stdout")
    serve.set_defaults(func=_cmd_serve)


def _pair(text: str, flag: str) -> tuple[str, Path]:
    name, sep, directory = text.partition("=")
    if not sep or not name or not directory:
        raise ConfigError(f"{flag} {text!r} must be NAME=DIR (e.g. {flag} credit=teeboost-model)")
    return name.strip(), Path(directory)


def _loader(args: argparse.Namespace, config):
    """How a directory becomes a scorer: locally, or (with a config) with the passive parties
    online; a model without passive parties (an active-only fallback) is always scored here."""
    from ..model_files import load_active
    from ..serving.local import LocalScorer

    def load(name: str, directory: Path):
        if config is None or not load_active(directory / "active.json").passive_parties:
            return LocalScorer(name, directory, allow_simulated_tee=args.allow_simulated_tee or
                               bool(config and config.options.allow_simulated_tee))
        from ..serving.federated import FederatedScorer

        return FederatedScorer(config, name, directory)

    return load


def _cmd_serve(args: argparse.Namespace) -> int:
    import sys

    from ..deploy.passive import SWITCH_INTERVAL

    sys.setswitchinterval(SWITCH_INTERVAL)  # the HTTP loop, its threads and the batcher hand work to each other
    from ..serving.app import create_app
    from ..serving.registry import Registry
    from ..serving.server import bind, run
    from ..serving.settings import ServingSettings, model_specs, parse_listen

    config = None
    settings = ServingSettings()
    if args.config is not None:
        from ..deploy.config import load_config

        config = load_config(args.config)
        if config.role != "active":
            raise ConfigError(f"{args.config}: teeboost serve runs at the active party; this config is a passive "
                              f"party's ([party] role = {config.role!r})")
        settings = config.serving
    models: dict[str, tuple[Path, ...]] = {}
    for text in args.model or []:
        name, directory = _pair(text, "--model")
        models[name] = (*models.get(name, ()), directory)
    if not models:
        models = dict(settings.models)
        if not models and config is not None:
            models = {"default": (config.model_dir,)}
    fallback = settings.fallback_model
    if args.fallback:
        name, sep, _ = args.fallback.partition("=")
        if sep:
            name, path = _pair(args.fallback, "--fallback")
            models[name] = (path,)
        fallback = name.strip()
    if args.fallback_for:
        if not isinstance(fallback, str):
            raise ConfigError("--fallback-for names the models of one fallback: give it with --fallback NAME[=DIR]")
        fallback = {model: fallback for model in args.fallback_for}
    if not models:
        raise ConfigError("nothing to serve: give --model NAME=DIR (a directory 'teeboost train' wrote), or --config "
                          "with a [serving] models table")
    host, port = parse_listen(settings.listen, "[serving] listen")
    host = args.host or host
    port = port if args.port is None else args.port
    max_rows = settings.max_rows_per_request if args.max_rows is None else args.max_rows
    if max_rows < 1:
        raise ConfigError(f"--max-rows {max_rows} must be >= 1")
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} must be 0..65535")
    specs = model_specs(models, fallback, args.on_unmatched or settings.on_unmatched)
    registry = Registry(specs, _loader(args, config))
    try:
        sock = bind(host, port)
        run(create_app(registry, max_rows=max_rows), sock, ready_file=args.ready_file, access_log=args.access_log)
    finally:
        registry.close()
    return 0
