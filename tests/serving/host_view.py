"""What a strict passive host sees of its enclave's answers, as an attacking host records it:
a patch of the ``teeboost`` command that writes down each answer's and ledger record's size and
the summary per request, and each base record's size per table load; and what a base record of
so many entries weighs, to compare with."""

import numpy as np

from teeboost.protocols.strict.enclave import online_messages as om
from teeboost.transport import serde

WATCH_PATCH = '''
import json, sys
from teeboost.deploy import online_strict

LOG = sys.argv.pop(1)
honest = online_strict.unpack_records


def watched(blob):
    """What the host gets back from its enclave per request and per table load, written down."""
    parts = honest(blob)
    if 0 in parts and 2 in parts:
        with open(LOG, "a") as out:
            out.write(json.dumps({"answer": len(parts[0]), "ledger_record": len(parts.get(1, b"")),
                                  "summary": json.loads(parts[2])}) + "\\n")
    elif 0 in parts and 1 in parts and b"ledger_version" in parts[1]:
        with open(LOG, "a") as out:
            out.write(json.dumps({"base_record": len(parts[0]),
                                  "version": json.loads(parts[1])["ledger_version"]}) + "\\n")
    return parts


online_strict.unpack_records = watched
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


def base_record_bytes(entries: int, version: int) -> int:
    """What a base record of so many entries weighs at ``version``, before it is sealed."""
    return len(serde.encode(om.StrictLedgerDelta(version, True, np.zeros((entries, 8), np.uint8),
                                                 np.zeros((entries, 16), np.uint8), np.zeros(entries),
                                                 np.zeros(entries, np.int64))))
