"""A whole federation in one process: every party over the in-memory channel.

This is what tests, benchmarks, the Python API and ``teeboost train`` run. Each party
still bins its own columns, keeps its own split records and talks only through serialised
messages, exactly as it would across hosts; only the transport differs.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .checkpoint import (ActiveCheckpoint, active_checkpoint_file, identity_key_file, passive_checkpoint_file,
                         platform_key_file, run_digest)
from .compute import ComputeBackend, ComputeOptions, open_backend
from .config import BoostParams, ProtocolOptions
from .core.binning import fit_bins
from .core.boosting import Booster, BoostState, TreeProgress, Validation, row_weights
from .core.columns import PartyColumns
from .core.loss import make_objective
from .core.split import SplitCriteria
from .data import PartyData, check_weights
from .errors import CheckpointError, ConfigError, DataError
from .labels import CHECKED_TARGETS, check_targets, encode_labels, encode_with_classes
from .policy import Policy
from .model_files import ActiveModel, PassiveModel, load_model_dir, remove_stale_models, save_models
from .parties.active import FederatedOracle, NotingFinder, announce_model, discard_trees, handshake, note_trees
from teeboost.protocols.messages import ResumeFrom, RunNote, SaveCheckpoint
from .parties.passive import PassiveParty
from teeboost.protocols.env import SIMULATED_HINT, ProtocolEnv
from teeboost.protocols.strict.hosts import StrictPredictPassive, announce_validation, disclose_records, strict_margin
from teeboost.protocols.strict.enclave.consent import Consent
from .tee.identity import PartyIdentity
from teeboost.protocols.registry import get_protocol
from .row_matching import match_rows
from .run_constraints import checked_constraints, party_constraints
from .tee.simulated import SimulatedPlatform
from .training_columns import check_distinct_feature_names, drop_unusable_columns
from .transport.base import Channel
from .transport.inmemory import InMemoryChannel
from .transport.transcript import TranscriptWriter

__all__ = ["FederatedModel", "TrainingRun", "train_local", "train_active", "build_passive"]


@dataclass
class TrainingRun:
    """What a training run reports besides the model.

    ``evals_result`` is XGBoost's: ``{"validation_0": {metric: [value per round]}}``, every
    metric of ``BoostParams.metrics_for``; ``best_iteration``/``best_score`` are set by early
    stopping (the last metric is watched). A strict run reports no validation metric, so its
    ``evals_result`` is empty and ``best_score`` None: with validation rows of the host's
    choosing, the metrics would be a prediction oracle (only ``best_iteration``, the model's
    size, comes out of the enclave)."""

    protocol: str
    objective: str
    n_rows: int
    train_seconds: float
    traffic: dict[str, Any]
    trees: list[TreeProgress] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds per crypto phase
    enclaves: str | None = None  # which enclave backend ran, for TEE protocols
    compute: str | None = None  # where the active party's heavy loops ran ("local processes (2 CPUs)", Ray)
    evals_result: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    best_iteration: int | None = None  # round kept by early stopping (from 0)
    best_score: float | None = None  # its watched validation metric
    #: exchanges with the passive parties while trees grew (validation and checkpoints included),
    #: per tree grown: what a link's latency multiplies (docs/reproduction.md, round trips)
    round_trips_per_tree: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "objective": self.objective,
            "n_samples": self.n_rows,
            "train_seconds": round(self.train_seconds, 4),
            **self.traffic,
            "phases": self.phases,
            **({"enclaves": self.enclaves} if self.enclaves else {}),
            **({"compute": self.compute} if self.compute else {}),
            "evals_result": self.evals_result,
            "best_iteration": self.best_iteration,
            "best_score": self.best_score,
            "round_trips_per_tree": self.round_trips_per_tree,
            "per_tree": [
                {"tree": t.tree_index, "leaves": t.n_leaves, "seconds": round(t.seconds, 4),
                 **({"valid_metric": t.valid_metric} if t.valid_metric is not None else {})}
                for t in self.trees
            ],
        }


@dataclass
class FederatedModel:
    """Every party's share of a trained model, as held by a local run."""

    active: ActiveModel
    passives: list[PassiveModel]
    options: ProtocolOptions | None = None  # strict models predict between enclaves: needs allow_simulated_tee

    @property
    def n_trees(self) -> int:
        return len(self.active.ensemble.trees)

    def save(self, model_dir: str | Path) -> list[Path]:
        """Every party's file; party files of an earlier model in ``model_dir`` are removed."""
        written = save_models(model_dir, self.active, self.passives)
        remove_stale_models(model_dir, written)
        return written

    @classmethod
    def load(cls, model_dir: str | Path, options: ProtocolOptions | None = None) -> "FederatedModel":
        active, passives = load_model_dir(model_dir)
        return cls(active, passives, options)

    @property
    def strict(self) -> bool:
        return self.active.protocol == "strict"

    def _parties(self, passive_features: list[np.ndarray], envs: list[ProtocolEnv]) -> list[PassiveParty]:
        if len(passive_features) != len(self.passives):
            raise DataError(f"the model has {len(self.passives)} passive parties, got data for {len(passive_features)}")
        parties = []
        for model, features in zip(self.passives, passive_features):
            protocol = (StrictPredictPassive(model.owner, model.model_digest, envs[model.index], model.index)
                        if self.strict else None)
            party = PassiveParty(model.index, model.name, model.feature_names, model.owner, protocol=protocol,
                                 protocol_name="strict" if self.strict else None, max_depth=model.max_depth,
                                 backend=envs[model.index].compute)
            party.add_dataset("predict", features)
            parties.append(party)
        return parties

    def predict_margin(self, active_features: np.ndarray, passive_features: list[np.ndarray], *,
                       compute: ComputeOptions | list[ComputeOptions | None] | None = None) -> tuple[np.ndarray, dict]:
        """Margins, and the traffic they took. A strict model's rows are routed between
        enclaves (fresh simulated ones here): the active side sees margins only. ``compute``:
        where each party answers its routing questions (as in ``train_local``)."""
        envs = (_environments(True, self.options or ProtocolOptions(), len(self.passives)) if self.strict
                else [ProtocolEnv() for _ in range(len(self.passives) + 1)])
        for env, settings in zip(envs, _per_party(compute, len(envs))):
            set_compute(env, settings)
        parties = self._parties(passive_features, envs)
        channel = InMemoryChannel({p.index: p.handle for p in parties}) if parties else None
        try:
            if self.strict:
                margin = strict_margin(channel, envs[0], self.active.ensemble, self.active.owner, active_features,
                                       "predict")
            else:
                oracle = FederatedOracle(channel, "predict", self.active.owner, active_features,
                                         backend=envs[0].compute)
                margin = self.active.ensemble.margin(active_features.shape[0], oracle)
        finally:
            for party in parties:
                party.close()
        traffic = channel.traffic.to_dict() if channel is not None else {"bytes_total": 0}
        return margin, traffic

    def predict(self, active_features: np.ndarray, passive_features: list[np.ndarray], *,
                compute: ComputeOptions | list[ComputeOptions | None] | None = None) -> np.ndarray:
        """Probability of the second class (binary), class probabilities, or values."""
        margin, _ = self.predict_margin(active_features, passive_features, compute=compute)
        return self.active.ensemble.loss.predict(margin)


def _environments(uses_enclaves: bool, options: ProtocolOptions, n_passive: int,
                  checkpoint_dir: Path | None = None) -> list[ProtocolEnv]:
    """One environment per party; for TEE protocols each party gets its own simulated platform,
    and every enclave trusts every party's platform root. A checkpointed run keeps its
    platforms' keys beside the checkpoints: sealed enclave state opens only on the same
    platform, as on hardware."""
    if not uses_enclaves:
        return [ProtocolEnv(options) for _ in range(n_passive + 1)]
    if not options.allow_simulated_tee:
        raise ConfigError(SIMULATED_HINT)
    if checkpoint_dir is None:
        platforms = [SimulatedPlatform.create() for _ in range(n_passive + 1)]
        identities = [PartyIdentity.generate() for _ in range(n_passive + 1)]
    else:
        platforms = [SimulatedPlatform.load_or_create(platform_key_file(checkpoint_dir, i))
                     for i in range(n_passive + 1)]
        identities = [PartyIdentity.load_or_create(identity_key_file(checkpoint_dir, i)) for i in range(n_passive + 1)]
    roots = tuple(p.attestation_root for p in platforms)
    keys = tuple(identity.public_key for identity in identities)
    return [ProtocolEnv(options, platform, roots, identity, keys) for platform, identity in zip(platforms, identities)]


def _columns(party: PartyData, params: BoostParams, backend: ComputeBackend | None = None) -> PartyColumns:
    """Binned columns; with a backend (the party's [compute]) binning and histograms run there."""
    bins = fit_bins(party.features, params.max_bin, categorical=party.categorical_mask, backend=backend)
    return PartyColumns(bins, bins.transform(party.features, backend=backend), backend=backend,
                        names=list(party.feature_names))


def set_compute(env: ProtocolEnv, compute: ComputeOptions | None) -> None:
    """Give a party's environment its [compute] backend. Local processes are the default:
    numpy loops stay in this process and big-integer work goes to ``workers`` processes
    (``crypto_workers``, unless that is set too); a cluster gets every heavy host loop."""
    if compute is None:
        return
    if compute.backend == "local":
        if compute.workers is not None and env.options.crypto_workers is None:
            env.options = dataclasses.replace(env.options, crypto_workers=compute.workers)
        return
    env.compute = open_backend(compute)


def _per_party(compute: ComputeOptions | list[ComputeOptions | None] | None, n_parties: int) -> list:
    if not isinstance(compute, list):
        return [compute] * n_parties
    if len(compute) != n_parties:
        raise ConfigError(f"compute settings for {len(compute)} parties, but the run has {n_parties}")
    return compute


def training_columns(party: PartyData, valid: PartyData | None = None) -> tuple[PartyData, PartyData | None]:
    """A party's training rows without the columns no split can use (warned about once),
    and its validation rows coded and ordered like them."""
    (party,) = drop_unusable_columns([party])
    if valid is not None:
        valid = valid.conform(list(party.feature_names), party.vocabularies, f"the validation data of {party.name!r}")
    return party, valid


def check_eval_set(params: BoostParams, validation: PartyData | None) -> None:
    """Early stopping without validation rows would silently train every tree: refuse it,
    as XGBoost does."""
    if params.early_stopping_rounds is not None and (validation is None or validation.n_rows == 0):
        raise ConfigError(f"early_stopping_rounds={params.early_stopping_rounds} needs validation rows to watch "
                          "(validation=/eval_set=, or --validation-size > 0); leave it unset to train every tree")


def _weighted(active: PartyData, sample_weight) -> PartyData:
    if active.weights is not None:
        raise ConfigError(f"{active.source}: sample weights given twice (sample_weight and the party's weight "
                          "column); give one")
    return active.with_weights(sample_weight)


def train_active(
    active: PartyData,
    channel: Channel,
    params: BoostParams,
    protocol: str,
    *,
    env: ProtocolEnv,
    party_names: dict[int, str],
    validation: tuple[PartyData, str] | None = None,
    transcript: str | Path | None = None,
    on_tree: Callable[[TreeProgress], None] | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    on_phase: Callable[[str], None] | None = None,
    sample_weight: np.ndarray | None = None,
    policy: Policy | None = None,
) -> tuple[ActiveModel, TrainingRun]:
    """The active party's side of training over any channel (in-memory or gRPC). Passive
    parties must already hold their rows in the active party's order and, for validation,
    a dataset of that name. With ``checkpoint_dir`` every party saves its state after every
    round; ``resume`` continues from those checkpoints. ``on_phase`` hears the protocol name
    its slow steps as they begin (for progress displays). ``policy``: the label owner's own
    (``max_passive_features``). ``sample_weight``: one weight per
    row of ``active`` (default: ``active.weights``); the validation rows' ``weights``, if
    any, weight the validation metrics."""
    spec = get_protocol(protocol)
    check_eval_set(params, None if validation is None else validation[0])
    if sample_weight is not None:
        active = _weighted(active, sample_weight)
    active, valid_active = training_columns(active, None if validation is None else validation[0])
    if validation is not None:
        validation = (valid_active, validation[1])
    y, classes, objective_name = encode_labels(active, params.objective, params.positive_class)
    objective = make_objective(objective_name, len(classes) if classes else 2, **params.objective_options())
    row_weights(params, objective_name, y, None)  # scale_pos_weight of a non-binary run is refused here
    params.metrics_for(objective_name)  # and eval_metric that does not score the inferred objective
    valid_y = encode_with_classes(validation[0], classes) if validation is not None else None
    if valid_y is not None and objective_name in CHECKED_TARGETS:
        check_targets(validation[0], valid_y, objective_name)
    weights = None if active.weights is None else check_weights(active.weights, active.n_rows, active.source)
    valid_weights = None
    if validation is not None and validation[0].weights is not None:
        valid_weights = check_weights(validation[0].weights, validation[0].n_rows, validation[0].source,
                                      "validation sample weight")
    started = time.perf_counter()
    active_columns = _columns(active, params, env.compute)
    digest = run_digest({"protocol": protocol, "params": params.to_dict(), "objective": objective_name,
                         "classes": classes, "parties": party_names, "features": list(active.feature_names),
                         "validation": None if validation is None else validation[0].n_rows},
                        y, active.features, *([] if weights is None else [weights]))
    run_id = f"{digest}.{secrets.token_hex(8)}"  # fresh per run: sealed state of another run never opens
    checkpoint_path = None if checkpoint_dir is None else active_checkpoint_file(checkpoint_dir)
    saved = None
    if resume:
        if checkpoint_path is None:
            raise CheckpointError("--resume needs the checkpoint directory of the interrupted run")
        saved = ActiveCheckpoint.load(checkpoint_path, len(active.feature_names))
        if saved.run_id.partition(".")[0] != digest:
            raise CheckpointError(f"{checkpoint_path} belongs to another run (data, parameters, parties or "
                                  "protocol changed); train without --resume to start afresh")
        run_id = saved.run_id
        active_columns.owner = saved.owner
    writer = None
    if transcript is not None:
        offset = None if saved is None else saved.transcript_offset
        if saved is not None and offset is None:
            raise CheckpointError(f"{checkpoint_path}: the interrupted run kept no transcript to continue")
        writer = TranscriptWriter(transcript, resume_at=offset)
    channel.transcript = writer
    progress: list[TreeProgress] = [] if saved is None else list(saved.progress)
    finder = None

    def report_tree(item: TreeProgress) -> None:
        progress.append(item)
        if on_tree is not None:
            on_tree(item)

    try:
        if writer is not None and saved is None:  # a resumed transcript already has it
            writer.note(RunNote(protocol, json.dumps({
                "params": params.to_dict(), "objective": objective_name, "n_rows": active.n_rows,
                "active_features": list(active.feature_names),
                "passive_parties": [{"index": i, "name": n} for i, n in sorted(party_names.items())],
            })))
        hello = handshake(channel, protocol, active.n_rows, params.max_bin, run_id=run_id)
        if policy is not None:
            for party, reply in hello.items():
                policy.check_passive_features(party_names.get(party, str(party)), reply.n_value_bins.size)
        if saved is not None:
            channel.request_all({p: ResumeFrom(run_id, saved.n_trees) for p in channel.parties})
        passive_bins = {party: reply.n_value_bins.astype(np.int64) for party, reply in hello.items()}
        passive_categorical = {party: reply.categorical.astype(bool) for party, reply in hello.items()}
        if spec.trains_in_enclave:  # validation rows ride along inside the enclaves
            announce_validation(channel, "" if validation is None else validation[1],
                                0 if validation is None else validation[0].n_rows)
        weighted = SplitCriteria.rows_weighted(params.scale_pos_weight, weights, valid_weights)
        checked_constraints(params, active, active_columns)
        constrained = party_constraints(params, list(active.feature_names), hello)
        finder = spec.make_active(channel, active_columns, SplitCriteria.from_params(params, weighted=weighted),
                                  passive_bins, passive_categorical, params,
                                  dataclasses.replace(env, run_id=run_id, on_phase=on_phase or env.on_phase))
        if constrained:
            finder.constrain(constrained)
        if policy is not None and hasattr(finder, "max_passive_features"):  # strict: counted in every passive enclave
            finder.max_passive_features = policy.max_passive_features or 0
        exchanges_before = channel.traffic.round_trips
        if spec.trains_in_enclave:
            ensemble, owner = _train_in_enclave(
                finder, channel, run_id, y, classes, objective_name, objective.n_outputs, active_columns,
                validation, valid_y, saved, report_tree, progress, writer, checkpoint_path, weights, valid_weights)
            active_columns.owner = owner
            evals_result = {}  # the enclave publishes no validation metric (see TrainingRun)
        else:
            if writer is not None:
                finder = NotingFinder(finder, writer, objective.n_outputs, params.constraints.any)
            if saved is not None and saved.sealed_enclave is not None:
                finder.restore_sealed_state(run_id, saved.sealed_enclave)

            def save_checkpoint(state: BoostState) -> None:
                n_trees = len(state.ensemble.trees)
                channel.request_all({p: SaveCheckpoint(run_id, n_trees) for p in channel.parties})
                ActiveCheckpoint(run_id, state, active_columns.owner, list(progress),
                                 None if writer is None else writer.offset(),
                                 finder.sealed_state(run_id)).save(checkpoint_path)

            booster = Booster(
                params, objective, finder,
                FederatedOracle(channel, "train", active_columns.owner, active.features),
                on_tree=report_tree,
                on_truncate=lambda keep: (active_columns.owner.keep_trees_below(keep), discard_trees(channel, keep)),
            )
            valid = None
            if validation is not None:
                valid = Validation(valid_y, FederatedOracle(channel, validation[1], active_columns.owner,
                                                            validation[0].features), valid_weights)
            ensemble = booster.fit(y, classes=classes, validation=valid,
                                   state=None if saved is None else saved.state,
                                   on_round=None if checkpoint_path is None else save_checkpoint,
                                   sample_weight=weights)
            evals_result = booster.evals_result()
        grown = len(ensemble.trees) - (0 if saved is None else saved.n_trees)
        round_trips_per_tree = round((channel.traffic.round_trips - exchanges_before) / grown, 2) if grown else None
        if not spec.trains_in_enclave:  # strict: the enclaves bind each party's records themselves
            announce_model(channel, ensemble)
        if writer is not None:
            note_trees(writer, ensemble.trees)
    except BaseException:
        if writer is not None:  # with checkpoints, the partial transcript is continued on --resume
            writer.close(complete=False, keep_partial=checkpoint_path is not None)
        raise
    finally:
        if finder is not None:
            finder.close()
        channel.transcript = None
    seconds = time.perf_counter() - started
    if writer is not None:
        writer.close()
    phases = dict(getattr(finder, "timer", {}) or getattr(getattr(finder, "inner", None), "timer", {}) or {})
    model = ActiveModel(ensemble, active_columns.owner, list(active.feature_names), dict(party_names),
                        protocol, params.to_dict(), active.label_name, vocabularies=dict(active.vocabularies))
    run = TrainingRun(protocol, objective_name, active.n_rows, seconds, channel.traffic.to_dict(), progress,
                      {k: round(v, 4) for k, v in phases.items()}, evals_result=evals_result,
                      best_iteration=ensemble.best_round, best_score=ensemble.best_score,
                      round_trips_per_tree=round_trips_per_tree)
    run.compute = env.compute_backend().describe()
    if spec.uses_enclaves:
        run.enclaves = ("simulated backend (separate processes, no hardware isolation; simulated quotes accepted "
                        "because allow_simulated_tee is set)")
    return model, run


def _train_in_enclave(trainer, channel: Channel, run_id: str, y: np.ndarray, classes, objective_name: str,
                      outputs: int, columns: PartyColumns, validation, valid_y, saved, report_tree, progress,
                      writer, checkpoint_path, weights=None, valid_weights=None):
    """Strict mode: the enclave runs the boosting loop; the host relays, reports progress and
    keeps sealed checkpoints. Returns the published ensemble and this party's own records."""

    def save_checkpoint(blob: bytes, n_trees: int) -> None:
        channel.request_all({p: SaveCheckpoint(run_id, n_trees) for p in channel.parties})
        ActiveCheckpoint(run_id, None, columns.owner, list(progress), None if writer is None else writer.offset(),
                         blob, n_trees).save(checkpoint_path)

    result = trainer.fit(
        y, classes, objective_name, outputs,
        valid_binned=None if validation is None else columns.bins.transform(validation[0].features).T,
        valid_labels=valid_y, sealed_checkpoint=None if saved is None else saved.sealed_enclave,
        weights=weights, valid_weights=valid_weights,
        on_tree=report_tree, on_checkpoint=None if checkpoint_path is None else save_checkpoint)
    return result.ensemble, result.owner


def train_local(
    active: PartyData,
    passives: list[PartyData],
    params: BoostParams,
    protocol: str = "plain",
    *,
    validation: tuple[PartyData, list[PartyData]] | None = None,
    transcript: str | Path | None = None,
    on_tree: Callable[[TreeProgress], None] | None = None,
    options: ProtocolOptions | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    on_phase: Callable[[str], None] | None = None,
    sample_weight: np.ndarray | None = None,
    compute: ComputeOptions | list[ComputeOptions | None] | None = None,
) -> tuple[FederatedModel, TrainingRun]:
    """Train with every party in this process over the in-memory channel; with
    ``checkpoint_dir`` each party checkpoints to its own file there. ``sample_weight``: one
    weight per row of ``active`` as given (default: ``active.weights``); the weights travel
    with those rows when they are matched to the passive parties' by id. ``compute``: where
    the parties' heavy loops run (one setting for all, or one per party, active first)."""
    spec = get_protocol(protocol)
    check_eval_set(params, None if validation is None else validation[0])
    if sample_weight is not None:
        active = _weighted(active, sample_weight)
    options = options or ProtocolOptions()
    envs = _environments(spec.uses_enclaves, options, len(passives),
                         None if checkpoint_dir is None else Path(checkpoint_dir))
    for env, settings in zip(envs, _per_party(compute, len(envs))):
        set_compute(env, settings)
    active, passives = match_rows(active, passives)
    check_distinct_feature_names([active, *passives])
    y, _, objective_name = encode_labels(active, params.objective, params.positive_class)  # label problems surface before any party starts
    row_weights(params, objective_name, y, None)
    active, *passives = drop_unusable_columns([active, *passives])
    if validation is not None:
        validation = match_rows(validation[0], validation[1], "id" if active.ids is not None else "position")
    parties: list[PassiveParty] = []
    channel = None
    try:
        for index, data in enumerate(passives, start=1):
            parties.append(build_passive(
                index, data, params, protocol, envs[index],
                valid=None if validation is None else validation[1][index - 1],
                checkpoint=None if checkpoint_dir is None else passive_checkpoint_file(checkpoint_dir, index)))
        channel = InMemoryChannel({p.index: p.handle for p in parties})
        model, run = train_active(active, channel, params, protocol, env=envs[0],
                                  party_names={p.index: p.name for p in parties},
                                  validation=None if validation is None else (validation[0], "valid"),
                                  transcript=transcript, on_tree=on_tree, checkpoint_dir=checkpoint_dir,
                                  resume=resume, on_phase=on_phase)
    finally:
        for party in parties:
            party.close()
        if channel is not None:
            channel.close()
    for party in parties:
        for phase, value in (getattr(party.protocol, "timer", None) or {}).items():
            run.phases[phase] = round(run.phases.get(phase, 0.0) + value, 4)
    passives_models = [PassiveModel(p.index, p.name, p.feature_names, p.owner,
                                    "strict" if spec.trains_in_enclave else "",
                                    getattr(p.protocol, "model_digest", "") or p.model_digest, params.max_depth,
                                    vocabularies=dict(p.vocabularies)) for p in parties]
    if spec.trains_in_enclave:
        for passive in passives_models:
            _disclose_in_process(passive, parties[passive.index - 1].protocol.sealed_records, envs)
    return FederatedModel(model, passives_models, options if spec.uses_enclaves else None), run


def _disclose_in_process(model: PassiveModel, sealed: bytes, envs: list[ProtocolEnv]) -> None:
    """One operator holds every party's data here, the labels included, so the label owner's
    consent is its own: each passive enclave's sealed records are disclosed at once (the
    simulated platforms of this process go with it, so the sealed copy would open nowhere)."""
    consent = Consent.sign(envs[0].identity, model.model_digest, model.index, model.name)
    model.owner.replace(disclose_records(envs[model.index], sealed, model.model_digest,
                                         bytes.fromhex(consent.signature)))
    model.disclosure = {**consent.__dict__, "by": "one operator running every party (train_local)"}


def build_passive(index: int, data: PartyData, params: BoostParams, protocol: str, env: ProtocolEnv,
                  *, valid: PartyData | None = None, checkpoint: Path | None = None,
                  policy: Policy | None = None, served_runs: set[str] | None = None) -> PassiveParty:
    """A passive party ready to train: its own bins, its protocol side, its datasets, and
    where it checkpoints (stamped with a digest of its own data, so a resumed run notices
    changed data)."""
    spec = get_protocol(protocol)
    data, valid = training_columns(data, valid)
    columns = _columns(data, params, env.compute)
    fingerprint = run_digest({"protocol": protocol, "params": params.to_dict(), "index": index,
                              "features": list(data.feature_names)}, data.features)
    party = PassiveParty(index, data.name, list(data.feature_names), columns.owner, columns=columns,
                         protocol=spec.make_passive(columns, params, env, index), protocol_name=protocol,
                         checkpoint=checkpoint, fingerprint=fingerprint, policy=policy, max_depth=params.max_depth,
                         vocabularies=data.vocabularies, served_runs=served_runs, backend=env.compute,
                         constraints=checked_constraints(params, data, columns))
    party.add_dataset("train", data.features)
    if valid is not None:
        party.add_dataset("valid", valid.features)
    return party
