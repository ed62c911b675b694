"""teeboost: vertical federated gradient boosting that leaks nothing but the model.

Protocols: ``plain`` (reference, no protection). SecureBoost (Paillier), N-TEE and 1-TEE
plug into the same engine and grow the same trees.
"""

from .config import BoostParams
from .data import PartyData, align_parties, split_columns
from .errors import ConfigError, DataError, ModelFileError, ProtocolError, TeeboostError
from .estimator import VerticalBoostClassifier, VerticalBoostRegressor
from .federation import FederatedModel, train_local

__version__ = "0.1.0"

__all__ = [
    "BoostParams", "PartyData", "split_columns", "align_parties",
    "VerticalBoostClassifier", "VerticalBoostRegressor", "FederatedModel", "train_local",
    "TeeboostError", "ConfigError", "DataError", "ProtocolError", "ModelFileError",
    "__version__",
]
