"""A passive party as its own process: ``teeboost party --config passive.toml``.

It loads its data, serves the active party over gRPC (mutual TLS), aligns ids by PSI, trains
under whichever protocol the active party sets up (refusing settings its own config forbids),
saves its own model file, answers routing questions for prediction (loading its saved model
and the requested rows by id), and stops on ``Shutdown``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..checkpoint import passive_checkpoint_file, remove_checkpoint
from ..config import BoostParams
from ..data import PartyData
from ..errors import DataError, ProtocolError
from ..federation import build_passive
from ..model_files import PassiveModel, load_passive, passive_file, save_models
from ..parties.messages import Ack
from ..parties.passive import PassiveParty
from ..parties.psi import PsiPassive, PsiRequest, PsiResult
from ..protocols.enclaves import ProtocolEnv
from ..protocols.strict import StrictPredictPassive
from ..transport.grpc_transport import PartyServer
from .config import PartyConfig, protocol_env
from .messages import Finish, PredictData, Setup, Shutdown

__all__ = ["PassiveService", "serve_passive"]


class PassiveService:
    def __init__(self, config: PartyConfig) -> None:
        self.config = config
        self.data = PartyData.from_csv(config.data, id_column=config.id_column, name=config.name)
        self.psi = PsiPassive(self.data.ids)
        self.party: PassiveParty | None = None
        self.server: PartyServer | None = None
        self._positions: dict[str, int] | None = None

    def env(self) -> ProtocolEnv:
        return protocol_env(self.config)

    def handle(self, msg: Any) -> Any:
        if isinstance(msg, (PsiRequest, PsiResult)):
            return self.psi.handle(msg)
        if isinstance(msg, Setup):
            return self._setup(msg)
        if isinstance(msg, Finish):
            return self._finish()
        if isinstance(msg, PredictData):
            return self._predict_data(msg)
        if isinstance(msg, Shutdown):
            print(f"teeboost: party {self.config.name}: shutting down ({msg.reason})", file=sys.stderr)
            if self.server is not None:
                self.server.request_stop()
            return Ack()
        if self.party is None:
            raise ProtocolError(f"party {self.config.name!r} has not been set up for training or prediction")
        return self.party.handle(msg)

    def _setup(self, msg: Setup) -> Ack:
        if self.psi.rows is None:
            raise ProtocolError("training set-up before id alignment")
        try:
            params = BoostParams(**json.loads(msg.params))
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"unusable training parameters: {exc}") from None
        aligned = self.data.take(self.psi.rows)
        for name, positions in (("train", msg.train), ("test", msg.test), ("valid", msg.valid)):
            if positions.size and (positions.min() < 0 or positions.max() >= aligned.n_rows):
                raise ProtocolError(f"{name} positions outside the {aligned.n_rows} aligned rows")
        if self.config.attestation is not None and msg.protocol not in HARDWARE_CHECKED:
            raise ProtocolError(f"party {self.config.name!r} requires hardware attestation ([attestation]) and "
                                f"refuses protocol {msg.protocol!r}, which would not check the active party's "
                                f"enclave with it (allowed: {', '.join(HARDWARE_CHECKED)})")
        if self.party is not None:
            self.party.close()
        train = aligned.take(msg.train)
        self.party = build_passive(self.config.index, train, params, msg.protocol, self.env(),
                                   valid=aligned.take(msg.valid) if msg.valid.size else None,
                                   checkpoint=self._checkpoint_file())
        self.party.add_dataset("test", aligned.features[msg.test])
        return Ack()

    def _finish(self) -> Ack:
        if self.party is None:
            raise ProtocolError("nothing was trained")
        model = PassiveModel(self.config.index, self.config.name, self.party.feature_names, self.party.owner,
                             "strict" if self.party.protocol_name == "strict" else "",
                             getattr(self.party.protocol, "model_digest", ""))
        save_models(self.config.model_dir, None, [model])
        remove_checkpoint(self._checkpoint_file())
        return Ack()

    def _checkpoint_file(self) -> Path:
        return passive_checkpoint_file(self.config.checkpoint_dir, self.config.index)

    def _predict_data(self, msg: PredictData) -> Ack:
        if self.party is None:
            model = load_passive(self.config.model_dir / passive_file(self.config.index))
            strict = model.protocol == "strict"  # routing only between enclaves
            self.party = PassiveParty(model.index, model.name, model.feature_names, model.owner,
                                      protocol=StrictPredictPassive(model.owner, model.model_digest, self.env(),
                                                                    model.index) if strict else None,
                                      protocol_name="strict" if strict else None)
        if self._positions is None:
            self._positions = {i: n for n, i in enumerate(self.data.ids)}
        ids = msg.ids.decode("utf-8").split("\n") if msg.ids else []
        missing = [i for i in ids if i not in self._positions]
        if missing:
            raise DataError(f"{self.config.data}: {len(missing)} id(s) to predict are not in this party's data "
                            f"(e.g. {missing[0]!r})")
        rows = np.array([self._positions[i] for i in ids], dtype=np.int64)
        position = {n: j for j, n in enumerate(self.data.feature_names)}
        columns = [position[n] for n in self.party.feature_names]
        self.party.add_dataset(msg.dataset, self.data.features[rows][:, columns])
        return Ack()

    def close(self) -> None:
        if self.party is not None:
            self.party.close()


#: Protocols in which this passive party verifies the active enclave's quote with its
#: [attestation] policy; a party that requires hardware attestation serves no other.
HARDWARE_CHECKED = ("onetee",)


def serve_passive(config: PartyConfig, *, ready_file: Path | None = None) -> None:
    service = PassiveService(config)
    server = PartyServer(service.handle, name=config.name, listen=config.listen, tls=config.tls,
                         insecure=config.insecure, max_message_bytes=config.max_message_bytes)
    service.server = server
    server.start()
    host = config.listen.rsplit(":", 1)[0]
    address = f"{host}:{server.port}"
    print(f"teeboost: party {config.name} (passive {config.index}) listening on {address} "
          f"({'INSECURE plaintext' if config.insecure else 'mutual TLS'})", file=sys.stderr, flush=True)
    if ready_file is not None:
        tmp = ready_file.with_name(ready_file.name + ".tmp")
        tmp.write_text(address)
        tmp.replace(ready_file)
    try:
        server.wait()
    finally:
        service.close()
