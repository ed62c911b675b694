"""The JSON bodies of the scoring API, as pydantic models: what FastAPI validates requests
against and what ``/openapi.json`` describes.

Requests are strict: an unknown field is refused, ids are strings. Feature values are
checked against the model's own columns after the envelope (``teeboost.serving.rows``), since
which columns exist depends on the model named.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

__all__ = ["ScoreRequest", "RequestRow", "ScoreResponse", "RowAnswer", "ErrorBody", "ModelsResponse",
           "HealthResponse", "ReloadResponse", "VERSION_PATTERN"]

VERSION_PATTERN = r"^[0-9a-f]{16}$"
_STRICT = ConfigDict(extra="forbid")

FeatureValue = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "null"}],
                                              "description": "a number; a category as text; null: missing"})]
Label = str | int | float


class RequestRow(BaseModel):
    model_config = _STRICT

    id: str = Field(min_length=1, max_length=256, description="the row's id, echoed in the answer (a passive party "
                                                              "finds its own columns of the row by it)")
    features: dict[str, FeatureValue] = Field(description="every column of the model (GET /v1/models); null for a "
                                                          "missing value")


class ScoreRequest(BaseModel):
    model_config = _STRICT

    model: str = Field(min_length=1, max_length=64, description="a served model's name (GET /v1/models)")
    version: str | None = Field(None, pattern=VERSION_PATTERN,
                                description="a loaded version to pin (16 hex digits); default: the current one")
    rows: list[RequestRow] = Field(min_length=1, description="rows to score (at most max_rows_per_request)")


class FieldError(BaseModel):
    field: str
    message: str


class ErrorBody(BaseModel):
    detail: str = Field(description="what is wrong, naming the field or the party")
    field: str | None = Field(None, description="the request field at fault, e.g. rows[3].features.age")
    errors: list[FieldError] = Field(default_factory=list, description="every problem found (422)")
    party: str | None = Field(None, description="503: the passive party that is unavailable")
    reference: str | None = Field(None, description="500: quote it to the operator; the log has the details")


class RowAnswer(BaseModel):
    id: str
    status: Literal["scored", "fallback", "error"] = Field(
        description="scored: by the model; fallback: by the fallback model (scored_by); error: not scored (reason)")
    score: float | dict[str, float] | None = Field(
        description="binary: probability of the positive class; multiclass: probability of each class; "
                    "regression: the value; null when not scored")
    prediction: Label | None = Field(description="the predicted class (binary: positive when score >= 0.5) or value")
    scored_by: str | None = Field(description="model@version that gave the score")
    reason: str | None = Field(description="why the model did not score the row (with fallback and error)")
    notes: list[str] = Field(description="what was done with the row's values, e.g. unseen categories")


class Counts(BaseModel):
    scored: int
    fallback: int
    error: int


class ScoreResponse(BaseModel):
    model: str
    version: str = Field(description="the model version that answered (model digest prefix)")
    protocol: str = Field(description="the protocol the model was trained with")
    enclaves: str | None = Field(description="enclave protocols: 'simulated' (no hardware isolation) or 'hardware'")
    objective: str
    score_is: str = Field(description="what each row's score is, in words")
    classes: list[Label]
    positive_class: Label | None = Field(description="binary: the class whose probability score is")
    counts: Counts
    rows: list[RowAnswer]


class FeatureInfo(BaseModel):
    name: str
    type: Literal["number", "category"]
    party: str | None = Field(None, description="whose column it is, when rows carry several parties' columns")
    categories: list[str] | None = None
    other: bool | None = Field(None, description="categories not listed share one 'other' code")


class VersionInfo(BaseModel):
    version: str
    kind: str = Field(description="local (every party's files here) or federated (passive parties online)")
    protocol: str
    enclaves: str | None
    objective: str
    classes: list[Label]
    features: list[FeatureInfo]
    loaded_at: float = Field(description="Unix time it was loaded")
    in_flight: int


class ModelInfo(BaseModel):
    name: str
    default_version: str = Field(description="the version answering requests that pin none")
    versions: list[VersionInfo]
    draining: list[str] = Field(description="replaced versions still finishing requests")
    on_unmatched: Literal["error", "fallback"]
    fallback: str | None


class ModelsResponse(BaseModel):
    models: list[ModelInfo]
    max_rows_per_request: int


class ModelHealth(BaseModel):
    versions: list[str]
    health: dict[str, Any] | None = Field(None, description="the scorer's own report (peers' reachability)")
    error: str | None = None


class HealthResponse(BaseModel):
    status: Literal["ok"]
    models: dict[str, ModelHealth]


class ReloadEntry(BaseModel):
    model: str
    directory: str
    status: Literal["unchanged", "reloaded", "failed"]
    version: str
    previous: str | None = None
    error: str | None = None


class ReloadResponse(BaseModel):
    ok: bool = Field(description="false when a directory failed to load (its old version serves on)")
    models: list[ReloadEntry]
