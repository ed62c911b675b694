"""teeboost: vertical federated gradient boosting that leaks nothing but the model.

Protocols: ``plain`` (reference, no protection), ``secureboost`` (Paillier or
Okamoto-Uchiyama), ``ntee`` (an enclave at every party) and ``onetee`` (one enclave at the
active party). All grow the same trees on the same bins.

The public names below are imported lazily, so enclave processes and the CLI that import one
submodule do not pay for the whole API.
"""

from importlib import import_module

__version__ = "0.1.0"

_API = {
    "BoostParams": "config", "ProtocolOptions": "config",
    "PartyData": "data", "split_columns": "data", "align_parties": "row_matching",
    "VerticalBoostClassifier": "estimator", "VerticalBoostRegressor": "estimator",
    "FederatedModel": "federation", "train_local": "federation",
    "TeeboostError": "errors", "ConfigError": "errors", "DataError": "errors", "ProtocolError": "errors",
    "ModelFileError": "errors", "AttestationError": "errors", "IntegrityError": "errors",
    "EnclaveError": "errors", "ComputeOptions": "compute",
}

__all__ = [*_API, "__version__"]


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'teeboost' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
