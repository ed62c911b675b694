"""Before any alignment, the parties of a deployed run compare the ``[protocol]`` settings they
must share, and a mismatch names the table and key to fix.

SecureBoost's homomorphic scheme (``[protocol] scheme``: "paillier" or "ou") is each party's own
setting; if the active party and a passive party differ, the passive party could not read the
active party's public key. Found at the key exchange, that is after PSI has already spent a share
of the passive party's daily alignment budget; found here, nothing has been exchanged yet.
"""

from __future__ import annotations

from ..config import ProtocolOptions
from ..errors import ProtocolError
from .messages import ProtocolSettings

__all__ = ["SHARED_BY", "settings_of", "compare_settings", "check_peer_settings"]

#: Protocols whose [protocol] settings every party must share.
SHARED_BY = ("secureboost",)


def settings_of(protocol: str, options: ProtocolOptions) -> ProtocolSettings:
    return ProtocolSettings(protocol, options.scheme)


def compare_settings(msg: ProtocolSettings, options: ProtocolOptions, party: str) -> None:
    """The passive party's side: the active party's settings against its own config's."""
    if msg.protocol in SHARED_BY and msg.scheme != options.scheme:
        raise ProtocolError(f"the active party runs {msg.protocol} with [protocol] scheme = {msg.scheme!r}; party "
                            f"{party!r} is set to scheme = {options.scheme!r} in its config's [protocol] table: "
                            "every party of the run must set the same [protocol] scheme (docs/configuration.md)")


def check_peer_settings(channel, protocol: str, options: ProtocolOptions, config: str) -> None:
    """The active party's side, before PSI: every passive party compares and names a mismatch;
    the refusal comes back with this party's own config file named too."""
    if protocol not in SHARED_BY:
        return
    mine = settings_of(protocol, options)
    try:
        channel.request_all({p: mine for p in channel.parties})
    except ProtocolError as exc:
        if "[protocol] scheme" not in str(exc):
            raise
        raise ProtocolError(f"{exc} (this party's is [protocol] scheme = {options.scheme!r} in {config})") from None
