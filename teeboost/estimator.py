"""The Python API: scikit-learn estimators over a federation run in this process.

Two ways in, both trained between parties that exchange only serialised messages:

    # one joined table, cut by a column-to-party mapping (scikit-learn's tools pass X, y)
    model = VerticalBoostClassifier(parties={"telco": ["age", "MonthlyIncome"]}).fit(X, y)
    cross_val_score(model, X, y, cv=3)

    # each organisation's own rows, aligned by id
    model = VerticalBoostClassifier(protocol="ntee", allow_simulated_tee=True).fit(bank, [telco])
    proba = model.predict_proba(bank_new, [telco_new])

Parameters carry XGBoost's names, meanings and defaults (``n_estimators``, ``learning_rate``/``eta``,
``gamma``, ``reg_alpha``, ``colsample_bytree``, ``scale_pos_weight``, ...; 100 trees of depth 6,
subsample 1, 256 bins). The CLI calls the same training code.
"""

from __future__ import annotations

import numbers
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.metrics import accuracy_score, r2_score

from .compute import ComputeOptions
from .config import BoostParams, ProtocolOptions, user_stacklevel
from .core.boosting import TreeProgress
from .core.constraints import parse_interactions, parse_monotone
from .data import PartyData
from .errors import ConfigError, DataError, ModelFileError
from .federation import FederatedModel, train_local
from .joined import JoinedLayout, as_frame
from .param_defaults import params_report
from .row_matching import align_parties

__all__ = ["VerticalBoostClassifier", "VerticalBoostRegressor", "party_features"]


def party_features(model: FederatedModel, active: PartyData, passives: list[PartyData]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each party's columns in the order its model expects, selected by name."""
    if len(passives) != len(model.passives):
        raise DataError(f"the model was trained with {len(model.passives)} passive parties, got {len(passives)}")
    passives = align_parties(active, passives)

    active_x = active.conform(model.active.feature_names, model.active.vocabularies,
                              "the active party's model").features
    passive_x = [d.conform(m.feature_names, m.vocabularies, f"passive party {m.index} ({m.name})").features
                 for d, m in zip(passives, model.passives)]
    return active_x, passive_x


#: Estimator parameter -> BoostParams field (XGBoost's names where XGBoost has one).
_BOOST_FIELDS = {
    "objective": "objective", "n_estimators": "n_trees", "max_depth": "max_depth",
    "learning_rate": "learning_rate", "subsample": "subsample", "colsample_bytree": "colsample_bytree",
    "reg_lambda": "reg_lambda", "reg_alpha": "reg_alpha", "gamma": "min_split_gain",
    "min_child_weight": "min_child_weight", "max_delta_step": "max_delta_step",
    "min_samples_leaf": "min_samples_leaf", "max_bin": "max_bin", "random_state": "random_state",
    "early_stopping_rounds": "early_stopping_rounds", "eval_metric": "eval_metric",
    "category_subsets": "category_subsets", "scale_pos_weight": "scale_pos_weight",
    "tweedie_variance_power": "tweedie_variance_power", "huber_slope": "huber_slope",
}
#: Other spellings users bring (teeboost's older names, XGBoost's native ones) -> parameter.
_ALIASES = {"n_trees": "n_estimators", "eta": "learning_rate", "min_split_gain": "gamma"}
#: Parameters that are not training settings and so are not saved with a model.
_RUNTIME = ("options", "transcript", "on_tree", "compute")  # this run and machine: never saved


class _VerticalBoost(BaseEstimator):
    """What both estimators share: parameters, the two input forms, fit, save and load."""

    _objectives: tuple[str, ...] = ()

    def __init__(self, protocol: str = "plain", *, parties: Mapping[str, list] | None = None,
                 n_estimators: int = 100, max_depth: int = 6, learning_rate: float = 0.3, subsample: float = 1.0,
                 colsample_bytree: float = 1.0, reg_lambda: float = 1.0, reg_alpha: float = 0.0,
                 gamma: float = 0.0, min_child_weight: float = 1.0, max_delta_step: float | None = None,
                 min_samples_leaf: int = 1, max_bin: int = 256, objective: str | None = None,
                 eval_metric: str | list[str] | None = None, early_stopping_rounds: int | None = None,
                 random_state: int | None = 0, category_subsets: bool = True, scale_pos_weight: float = 1.0,
                 tweedie_variance_power: float = 1.5, huber_slope: float = 1.0,
                 monotone_constraints: Mapping[str, int] | Sequence[int] | str | None = None,
                 interaction_constraints: Sequence[Sequence[str | int]] | str | None = None,
                 allow_simulated_tee: bool = False,
                 options: ProtocolOptions | None = None, transcript: str | Path | None = None,
                 on_tree: Callable[[TreeProgress], None] | None = None, n_trees: int | None = None,
                 eta: float | None = None, min_split_gain: float | None = None,
                 compute: ComputeOptions | None = None) -> None:
        """``protocol``: plain, secureboost, ntee, onetee or strict. ``parties``: for a joined
        table, each passive party's name and columns (the active party keeps the rest).
        ``allow_simulated_tee``: ntee, onetee and strict run on the simulated enclave backend
        (no hardware isolation) only when asked to. ``n_trees``, ``eta`` and
        ``min_split_gain`` are accepted spellings of ``n_estimators``, ``learning_rate``
        and ``gamma``. ``compute``: where the parties' heavy loops run (``ComputeOptions``,
        e.g. a Ray cluster; docs/scaling.md). ``monotone_constraints`` and
        ``interaction_constraints`` take XGBoost's forms (a dict by column name, or a tuple in
        the joined table's column order; lists of column names or positions), over every
        party's columns (docs/constraints.md). Values are checked when fitting, as
        scikit-learn expects."""
        self.protocol = protocol
        self.parties = parties
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.max_delta_step = max_delta_step
        self.min_samples_leaf = min_samples_leaf
        self.max_bin = max_bin
        self.objective = objective
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.category_subsets = category_subsets
        self.scale_pos_weight = scale_pos_weight
        self.tweedie_variance_power = tweedie_variance_power
        self.huber_slope = huber_slope
        self.monotone_constraints = monotone_constraints
        self.interaction_constraints = interaction_constraints
        self.allow_simulated_tee = allow_simulated_tee
        self.options = options
        self.transcript = transcript
        self.on_tree = on_tree
        self.n_trees = n_trees
        self.eta = eta
        self.min_split_gain = min_split_gain
        self.compute = compute

    # -- parameters

    def _boost_params(self) -> BoostParams:
        """The training parameters these settings ask for, validated (errors name the field)."""
        values = {name: getattr(self, name) for name in _BOOST_FIELDS}
        defaults = type(self)().get_params()
        for alias, name in _ALIASES.items():
            given = getattr(self, alias)
            if given is None:
                continue
            if values[name] != defaults[name] and values[name] != given:
                raise ConfigError(f"{alias}={given!r} and {name}={values[name]!r} name the same parameter")
            values[name] = given
        values["random_state"] = _seed(values["random_state"])
        if isinstance(values["eval_metric"], list):
            values["eval_metric"] = tuple(values["eval_metric"])
        for name in ("n_estimators", "max_depth", "min_samples_leaf", "max_bin", "early_stopping_rounds"):
            if isinstance(values[name], numbers.Integral) and not isinstance(values[name], bool):
                values[name] = int(values[name])  # numpy integers from parameter grids
        params = BoostParams(**{_BOOST_FIELDS[k]: v for k, v in values.items()})
        if params.objective is not None and params.objective not in self._objectives:
            raise ConfigError(f"objective={self.objective!r} is not valid for {type(self).__name__} "
                              f"(use one of {', '.join(self._objectives)})")
        return params

    def _constrained(self, params: BoostParams, X: Any, active, passives) -> BoostParams:
        """The constraints by column name: positions count in X's column order (a joined
        table) or the active party's columns then each passive party's."""
        names = [*active.feature_names, *(f for p in passives for f in p.feature_names)]
        columns = getattr(X, "columns", None)
        order = [c for c in map(str, columns) if c in set(names)] if columns is not None else names
        try:
            monotone = parse_monotone(self.monotone_constraints, order)
            interaction = parse_interactions(self.interaction_constraints, order)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return params.replace(monotone_constraints=monotone or None, interaction_constraints=interaction or None)

    def _options(self) -> ProtocolOptions:
        options = self.options or ProtocolOptions()
        if self.allow_simulated_tee and not options.allow_simulated_tee:
            options = ProtocolOptions(**{**options.to_dict(), "allow_simulated_tee": True})
        return options

    # -- the two input forms

    def _parties_of(self, X: Any, y: Any, what: str, *, fitting: bool = False,
                    label: str | None = None) -> tuple[PartyData, list[PartyData], np.ndarray | None]:
        """(active, passives, labels as given) for either input form."""
        if fitting:
            self._layout = None
        if isinstance(X, PartyData):
            passives = [] if y is None else y
            if not isinstance(passives, (list, tuple)) or not all(isinstance(p, PartyData) for p in passives):
                raise DataError(f"with {what} given as PartyData, the second argument must be the list of "
                                "passive parties' PartyData")
            return X, list(passives), None
        if isinstance(y, (list, tuple)) and y and all(hasattr(p, "columns") for p in y):
            return self._frames_per_party(X, y, what, label)
        if fitting:
            if y is None:
                raise DataError(f"{type(self).__name__} requires y to be passed, but the target y is None "
                                f"(give labels with the table {what}, or the active party's PartyData and the "
                                "passive parties' list)")
            y = self._label_vector(y, what)
            frame = as_frame(X, what)
            if frame.shape[0] != y.shape[0]:
                raise DataError(f"{what} has {frame.shape[0]} rows but y has {y.shape[0]} labels")
            if frame.shape[0] < 2:
                raise DataError(f"{what} has 1 sample (n_samples=1); training needs at least 2 rows")
            self._layout = JoinedLayout.of(frame.columns, self.parties)
        layout = self._fitted_layout()
        active, passives = layout.split(X, y, what, type(self).__name__)
        return active, passives, y

    def _label_vector(self, y: Any, what: str) -> np.ndarray:
        labels = np.asarray(y)
        if labels.ndim == 2 and labels.shape[1] == 1:
            warnings.warn(f"A column-vector y was passed when a 1d array was expected (shape {labels.shape} for "
                          f"{what}); it is read as one label per row: pass y.ravel() to avoid this warning",
                          DataConversionWarning, stacklevel=user_stacklevel())
            labels = labels.ravel()
        if labels.ndim != 1:
            raise DataError(f"y for {what} must be one label per row (y should be a 1d array), "
                            f"got shape {labels.shape}")
        return labels

    def _frames_per_party(self, X, frames, what, label):
        """``fit(active_frame, [passive_frames], label=...)``: each party's own DataFrame,
        aligned by position."""
        if label is None:
            raise DataError(f"{what} is the active party's DataFrame and the second argument the passive "
                            "parties' DataFrames: name the label column with label=..., or wrap each frame in "
                            "PartyData.from_frame, or pass the joined table with parties=")
        active = PartyData.from_frame(as_frame(X, what), label=label, name="active", require_label=True)
        passives = [PartyData.from_frame(as_frame(f, f"passive frame {i}"), name=f"passive-{i}")
                    for i, f in enumerate(frames, start=1)]
        return active, passives, None

    def _fitted_layout(self) -> JoinedLayout:
        layout = getattr(self, "_layout", None)
        if layout is None:
            raise DataError(f"this {type(self).__name__} was fitted on PartyData: predict from PartyData too "
                            "(the active party's and the list of passive parties')")
        return layout

    def _eval_parties(self, eval_set: Any) -> tuple[PartyData, list[PartyData]] | None:
        if eval_set is None:
            return None
        if isinstance(eval_set, tuple) and len(eval_set) == 2 and isinstance(eval_set[0], PartyData):
            eval_set = [eval_set]  # the older single-pair form
        if not isinstance(eval_set, (list, tuple)) or not eval_set:
            raise DataError("eval_set must be a list of (X, y) pairs")
        if len(eval_set) > 1:
            raise DataError(f"eval_set holds {len(eval_set)} sets; a federated run evaluates one validation set "
                            "(its rows are spread over the parties): pass the one to watch")
        pair = eval_set[0]
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise DataError("each eval_set entry must be a pair (X, y), or (active PartyData, [passive PartyData])")
        active, passives, _ = self._parties_of(pair[0], pair[1], "eval_set[0]")
        return active, passives

    # -- training

    def fit(self, X: Any, y: Any = None, *, sample_weight: Any = None, eval_set: Any = None,
            label: str | None = None) -> "_VerticalBoost":
        """Train. ``X``: the joined table (rows x columns; ``parties`` says who holds which)
        with labels ``y``; or the active party's PartyData with the passive parties' list
        as ``y``. ``eval_set``: [(X_valid, y_valid)] in the same form; it is needed by
        ``early_stopping_rounds``. ``sample_weight``: one weight per training row."""
        params = self._boost_params()
        asked = params_report(params)  # before the objective is inferred: what was left at XGBoost's defaults
        active, passives, given_y = self._parties_of(X, y, "X", fitting=True, label=label)
        validation = self._eval_parties(eval_set)
        if params.early_stopping_rounds is not None and validation is None:
            raise ConfigError(f"early_stopping_rounds={params.early_stopping_rounds} needs validation data: "
                              "pass eval_set=[(X_valid, y_valid)]")
        params = params.replace(objective=self._objective_for(active))  # a mismatch surfaces before training
        params = self._constrained(params, X, active, passives)
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        model, run = train_local(active, passives, params, self.protocol, validation=validation,
                                 transcript=self.transcript, on_tree=self.on_tree, options=self._options(),
                                 sample_weight=weights, compute=self.compute)
        self._take_model(model, {**run.to_dict(), "params": asked}, given_y)
        return self

    def _take_model(self, model: FederatedModel, report: dict[str, Any] | None, given_y: np.ndarray | None) -> None:
        self.model_, self.report_ = model, report
        names = [*model.active.feature_names, *(f for p in model.passives for f in p.feature_names)]
        layout = getattr(self, "_layout", None)
        self.n_features_in_ = len(layout.columns) if layout is not None else len(names)
        if layout is None or not all(c.isdigit() for c in layout.columns):
            self.feature_names_in_ = np.asarray(layout.columns if layout is not None else names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        classes = model.active.ensemble.classes
        if classes is not None:
            plain = np.asarray(classes)
            if given_y is not None:
                distinct = np.unique(given_y)
                if distinct.size == plain.size:
                    plain = distinct  # the caller's own label values and dtype
            self.classes_ = plain
            self.n_classes_ = int(plain.size)
        self.evals_result_ = (report or {}).get("evals_result", {}) or {}

    def _objective_for(self, active: PartyData) -> str:
        """The objective this estimator trains for these labels (its own, or the one it was given)."""
        raise NotImplementedError

    # -- prediction

    def _fitted(self) -> FederatedModel:
        model = getattr(self, "model_", None)
        if model is None:
            from sklearn.exceptions import NotFittedError
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")
        return model

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN is a missing value, routed by each split's learnt direction
        tags.input_tags.categorical = True  # text and pandas categorical columns split as categories
        tags.non_deterministic = False
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return getattr(self, "model_", None) is not None

    def _margin(self, X: Any, passive: list[PartyData] | None) -> np.ndarray:
        model = self._fitted()
        active, passives, _ = self._parties_of(X, passive, "X")
        active_x, passive_x = party_features(model, active, passives)
        margin, _ = model.predict_margin(active_x, passive_x, compute=self.compute)
        return margin

    def _predict_raw(self, X: Any, passive: list[PartyData] | None) -> np.ndarray:
        return self._fitted().active.ensemble.loss.predict(self._margin(X, passive))

    @property
    def best_iteration(self) -> int:
        """The round early stopping kept (0-based), as in XGBoost."""
        best = self._fitted().active.ensemble.best_round
        if best is None:
            raise AttributeError("best_iteration is only defined when early stopping is used")
        return best

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Accuracy (classifier) or R² (regressor); for PartyData, ``y`` is the passive
        parties' list and the labels are the active party's."""
        if isinstance(X, PartyData):
            return float(self._score(X.labels, self.predict(X, y), sample_weight=sample_weight))
        return float(self._score(y, self.predict(X), sample_weight=sample_weight))

    def evals_result(self) -> dict[str, dict[str, list[float]]]:
        """Validation metrics per round, as XGBoost gives them: {"validation_0": {"auc": [...]}}."""
        self._fitted()
        return self.evals_result_

    @property
    def feature_importances_(self) -> np.ndarray:
        """One value per feature (in ``feature_names_in_`` order: the joined table's, or the
        active party's features then each passive party's), normalised to sum to 1. The type is
        XGBoost's scikit-learn default, average gain; a strict model keeps gains inside its
        enclaves and publishes split counts only, so those rank its features."""
        from .explain.importance import joint_importances

        model = self._fitted()
        joint = joint_importances(model, "weight" if model.strict else "gain")
        layout = getattr(self, "_layout", None)
        if layout is None:
            return joint
        by_name = dict(zip([*model.active.feature_names, *(f for p in model.passives for f in p.feature_names)],
                           joint))
        return np.array([by_name.get(c, 0.0) for c in layout.columns])  # X's order; dropped columns: 0

    def shap_values(self, X: Any, passive: list[PartyData] | None = None, *,
                    party: int | str = 0) -> tuple[np.ndarray, np.ndarray | float]:
        """TreeSHAP values from one party's seat (index or name; 0 is the active party): its own
        features one each, then every other party as one player (``shap_players``). Returns
        (values, expected margin); values sum with it to each row's margin. What crosses
        parties to compute it is in docs/explain.md."""
        from .explain.shap import shap_values

        model = self._fitted()
        active, passives, _ = self._parties_of(X, passive, "X")
        active_x, passive_x = party_features(model, active, passives)
        return shap_values(model, active_x, passive_x, party=self._party_index(party))

    def shap_players(self, party: int | str = 0) -> list[str]:
        """Names of the players of ``party``'s explanation, in ``shap_values`` column order."""
        from .explain.shap import shap_players

        return shap_players(self._fitted(), self._party_index(party))

    def _party_index(self, party: int | str) -> int:
        model = self._fitted()
        names = {0: "active", **{p.index: p.name for p in model.passives}}
        if isinstance(party, str):
            found = [i for i, n in names.items() if n == party]
            if not found:
                raise DataError(f"no party named {party!r} (parties: {', '.join(names.values())})")
            return found[0]
        if party not in names:
            raise DataError(f"no party {party} (parties: {', '.join(map(str, names))})")
        return int(party)

    def to_xgboost(self, path: str | Path | None = None) -> dict[str, Any]:
        """The whole model as XGBoost JSON (every party's part merged, which reveals every
        party's thresholds to whoever holds it; between organisations use ``teeboost export``).
        Written to ``path`` if given; columns are ``feature_names_in_`` of a PartyData fit,
        i.e. the active party's features then each passive party's."""
        import json

        from .export import export_xgboost

        exported = export_xgboost(self._fitted())
        if path is not None:
            Path(path).write_text(json.dumps(exported), encoding="utf-8")
        return exported

    # -- files

    def save(self, model_dir: str | Path) -> list[Path]:
        """Every party's model file, with these settings and the run report in the active
        party's (so ``load`` gives back the same estimator)."""
        model = self._fitted()
        model.active.report = self.report_
        model.active.estimator = self._estimator_record()
        return model.save(model_dir)

    save_model = save

    def _estimator_record(self) -> dict[str, Any]:
        params = {k: v for k, v in self.get_params().items() if k not in _RUNTIME}
        if isinstance(params.get("eval_metric"), tuple):
            params["eval_metric"] = list(params["eval_metric"])
        layout = getattr(self, "_layout", None)
        return {
            "class": type(self).__name__,
            "params": params,
            "layout": None if layout is None else {"columns": list(layout.columns),
                                                   "parties": [[n, list(c)] for n, c in layout.parties]},
            "classes": None if not hasattr(self, "classes_") else self.classes_.tolist(),
        }

    @classmethod
    def load(cls, model_dir: str | Path, *, allow_simulated_tee: bool = False) -> "_VerticalBoost":
        """An estimator from a model folder: the same settings, report and predictions.
        ``allow_simulated_tee``: a strict model predicts between enclaves, which here are
        simulated (no hardware isolation) and so run only when asked to."""
        options = ProtocolOptions(allow_simulated_tee=allow_simulated_tee)
        model = FederatedModel.load(model_dir, options)
        record = model.active.estimator or {}
        if record.get("class") not in (None, cls.__name__):
            raise ConfigError(f"{model_dir} holds a {record['class']}, not a {cls.__name__}")
        params = cls._saved_params(record, model, model_dir)
        if not params:  # a model trained by the CLI: its training parameters, by our names
            saved = BoostParams(**model.active.params) if model.active.params else BoostParams()
            params = {k: getattr(saved, f) for k, f in _BOOST_FIELDS.items() if k in cls().get_params()}
            params["protocol"] = model.active.protocol
            if isinstance(params.get("eval_metric"), tuple):
                params["eval_metric"] = list(params["eval_metric"])
        params["allow_simulated_tee"] = allow_simulated_tee or bool(params.get("allow_simulated_tee"))
        estimator = cls(**params)
        layout = record.get("layout")
        if layout:
            estimator._layout = _saved_layout(layout, model, model_dir)
        classes = record.get("classes")
        estimator._take_model(model, model.active.report, None if classes is None else np.asarray(classes))
        return estimator

    load_model = load

    @classmethod
    def _saved_params(cls, record: dict[str, Any], model: FederatedModel, model_dir) -> dict[str, Any]:
        """The settings a model file names, checked: a file does not choose where a later fit
        writes (runtime keys are not read), nor a protocol other than the one that trained it."""
        params = record.get("params") or {}
        if not isinstance(params, dict):
            raise ModelFileError(f"{model_dir}: the estimator's params must be an object")
        known = set(cls().get_params()) - set(_RUNTIME)
        unknown = sorted(set(params) - known)
        if unknown:
            raise ModelFileError(f"{model_dir}: the estimator's params name unknown or runtime-only "
                                 f"parameter(s) {', '.join(map(str, unknown))}")
        if params and params.get("protocol") != model.active.protocol:
            raise ModelFileError(f"{model_dir}: the estimator's params say protocol={params.get('protocol')!r}, "
                                 f"but the model was trained with {model.active.protocol!r}")
        return dict(params)


def _saved_layout(layout: Any, model: FederatedModel, model_dir) -> JoinedLayout:
    """The joined table's columns as saved, checked against the parties' own feature names:
    a layout that would feed one party's column to another is refused."""
    try:
        saved = JoinedLayout(tuple(str(c) for c in layout["columns"]),
                             tuple((str(n), tuple(str(c) for c in cols)) for n, cols in layout["parties"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{model_dir}: malformed column layout ({exc})") from None
    checked = JoinedLayout.of(saved.columns, {name: list(cols) for name, cols in saved.parties[1:]})
    if [cols for _, cols in checked.parties] != [cols for _, cols in saved.parties]:
        raise ModelFileError(f"{model_dir}: the column layout does not cut its own columns into parties")
    owners = [model.active.feature_names, *(p.feature_names for p in model.passives)]
    if len(owners) != len(saved.parties) or any(not set(features) <= set(cols)
                                                for features, (_, cols) in zip(owners, saved.parties)):
        raise ModelFileError(f"{model_dir}: the column layout does not match the parties' features")
    return saved


def _labels_of(active: PartyData) -> np.ndarray:
    if active.labels is None:
        raise DataError(f"{active.source}: the active party has no label column")
    return active.labels


def _seed(value: Any) -> int:
    """scikit-learn's random_state (None, an int or a RandomState) as the int the run uses."""
    if value is None:
        return 0
    if isinstance(value, np.random.RandomState):
        return int(value.randint(0, 2**31 - 1))
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise ConfigError(f"random_state={value!r} must be an integer, a numpy RandomState or None")


class VerticalBoostClassifier(ClassifierMixin, _VerticalBoost):
    """Binary (logistic) or multiclass (softmax) classification."""

    _objectives = ("binary", "multiclass")
    _score = staticmethod(accuracy_score)

    def _objective_for(self, active: PartyData) -> str:
        labels = _labels_of(active)
        distinct = np.unique(labels)
        params = self._boost_params()
        if params.objective is not None:
            return params.objective
        if distinct.size == 2:
            return "binary"
        if labels.dtype != object and not np.all(np.mod(distinct, 1) == 0):
            raise DataError(f"{active.source}: label column {active.label_name!r} holds continuous values "
                            f"(e.g. {distinct[np.flatnonzero(np.mod(distinct, 1))[0]]!r}); "
                            "use VerticalBoostRegressor for a numeric target")
        if distinct.size < 2:
            raise DataError(f"{active.source}: label column {active.label_name!r} has a single class "
                            f"({distinct[0]!r}); a classifier needs at least two")
        return "multiclass"

    def predict_proba(self, X: Any, passive: list[PartyData] | None = None) -> np.ndarray:
        """(n_rows, n_classes) probabilities, columns in ``classes_`` order."""
        raw = self._predict_raw(X, passive)
        return np.column_stack([1.0 - raw, raw]) if raw.ndim == 1 else raw

    def predict(self, X: Any, passive: list[PartyData] | None = None, *, output_margin: bool = False) -> np.ndarray:
        """Class labels; with ``output_margin`` the raw margins (log-odds) instead."""
        if output_margin:
            margin = self._margin(X, passive)
            return margin[:, 0] if margin.shape[1] == 1 else margin
        proba = self.predict_proba(X, passive)
        return self.classes_[np.argmax(proba, axis=1)]



class VerticalBoostRegressor(RegressorMixin, _VerticalBoost):
    """Squared-error, Poisson, Tweedie, gamma or pseudo-Huber regression (XGBoost's reg:squarederror,
    count:poisson, reg:tweedie, reg:gamma, reg:pseudohubererror)."""

    _objectives = ("regression", "poisson", "tweedie", "gamma", "pseudohuber")
    _score = staticmethod(r2_score)

    def _objective_for(self, active: PartyData) -> str:
        labels = _labels_of(active)
        if labels.dtype == object:
            raise DataError(f"{active.source}: label column {active.label_name!r} holds text "
                            f"(e.g. {labels[0]!r}): Unknown label type for a regressor; use "
                            "VerticalBoostClassifier for classes")
        return self._boost_params().objective or "regression"

    def _label_vector(self, y: Any, what: str) -> np.ndarray:
        labels = super()._label_vector(y, what)
        if labels.dtype == object:  # numbers held as Python objects are still numbers
            try:
                labels = labels.astype(np.float64)
            except (TypeError, ValueError):
                pass
        return labels

    def predict(self, X: Any, passive: list[PartyData] | None = None, *, output_margin: bool = False) -> np.ndarray:
        """Values; with ``output_margin`` the raw margins (log of the mean for poisson, tweedie, gamma)."""
        if output_margin:
            return self._margin(X, passive)[:, 0]
        return self._predict_raw(X, passive)
