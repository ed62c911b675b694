"""Disclosing a strict model's passive split records: two explicit, audited acts.

A passive party's records of a strict run stay sealed in its enclave (they say which way the
labels lean at its splits). For export or importances, the label owner signs a consent for
one party and one model (``consent``: ``teeboost consent``), and that party's host takes it to
a fresh enclave of its own, which opens the records only for that signature (``disclose``:
``teeboost disclose``). Each act goes into its party's audit log.
"""

from __future__ import annotations

from pathlib import Path

from ..audit import AuditLog
from ..errors import ConfigError, ModelFileError
from ..model_files import ACTIVE_FILE, PassiveModel, load_active, load_passive, passive_file, save_models
from teeboost.protocols.strict.hosts import disclose_records
from teeboost.protocols.strict.enclave.consent import Consent
from teeboost.protocols.strict.enclave.messages import model_digest
from .config import load_config, protocol_env

__all__ = ["consent", "disclose"]


def consent(config_path: str | Path, party: str, out: str | Path) -> Consent:
    """The label owner's consent that passive party ``party`` (name or index) may see its own
    split records of the saved strict model, written to ``out``."""
    config = load_config(config_path)
    if config.role != "active":
        raise ConfigError(f"{config_path}: only the label owner (the active party) consents to a disclosure; "
                          f"this is party {config.name!r}'s config ({config.role})")
    model = load_active(config.model_dir / ACTIVE_FILE)
    if model.protocol != "strict":
        raise ConfigError(f"{config.model_dir / ACTIVE_FILE}: a {model.protocol} model; only strict models keep "
                          "passive records sealed (the other protocols give each party its records)")
    index = next((i for i, name in model.passive_parties.items() if party in (name, str(i))), None)
    if index is None:
        raise ConfigError(f"--party {party!r}: the model's passive parties are "
                          f"{', '.join(f'{n} ({i})' for i, n in sorted(model.passive_parties.items()))}")
    digest = model_digest(model.ensemble.to_dict()).hex()
    identity = protocol_env(config).require_identity(0)
    signed = Consent.sign(identity, digest, index, model.passive_parties[index])
    signed.save(out)
    AuditLog(config.audit_log, config.name).write("consented", party=signed.party_name, index=index,
                                                  model_digest=digest, out=str(out))
    return signed


def disclose(config_path: str | Path, consent_path: str | Path) -> PassiveModel:
    """Open this passive party's sealed records of its saved strict model, on the label
    owner's consent; the model file then holds them in the clear (and the consent)."""
    config = load_config(config_path)
    if config.role != "passive":
        raise ConfigError(f"{config_path}: disclose runs at the passive party whose records are sealed; this is "
                          f"party {config.name!r}'s config ({config.role})")
    signed = Consent.load(consent_path)
    path = config.model_dir / passive_file(config.index)
    model = load_passive(path)
    if not model.sealed_records:
        raise ModelFileError(f"{path}: holds no sealed records (only a strict model's passive records are sealed)")
    if signed.party != config.index:
        raise ConfigError(f"{consent_path}: the consent is for party {signed.party_name!r} (index {signed.party}); "
                          f"this is party {config.name!r} (index {config.index})")
    if signed.model_digest != model.model_digest:
        raise ConfigError(f"{consent_path}: the consent names model {signed.model_digest[:16]}; party "
                          f"{config.name!r} holds model {model.model_digest[:16]}")
    audit = AuditLog(config.audit_log, config.name)
    try:
        owner = disclose_records(protocol_env(config), model.sealed_records, model.model_digest,
                                 bytes.fromhex(signed.signature))
    except Exception as exc:
        audit.write("refused", what="disclose", model_digest=model.model_digest, reason=str(exc))
        raise
    model.owner.replace(owner)
    model.disclosure = dict(signed.__dict__)
    save_models(config.model_dir, None, [model])
    audit.write("disclosed", model_digest=model.model_digest, signed_by=signed.signed_by, records=len(owner),
                consent=str(consent_path))
    return model
