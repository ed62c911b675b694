from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from teeboost.config import BoostParams
from teeboost.errors import DataError
from teeboost.federation import train_local
from teeboost.protocols.messages import GradientsNote
from teeboost.protocols.scoring.plain import HistogramReply
from teeboost.transport.transcript import NOTE, RECEIVED, SENT, read_transcript


def test_transcript_holds_the_active_party_view(tmp_path, small_credit):
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    model, run = train_local(active, passives, BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32), transcript=path)
    records = list(read_transcript(path))
    kinds = Counter((r.kind, type(r.message).__name__) for r in records)
    assert kinds[(NOTE, "GradientsNote")] == 2 and kinds[(NOTE, "TreeNote")] == 2
    assert kinds[(RECEIVED, "HistogramReply")] == kinds[(SENT, "HistogramRequest")] > 0
    assert not (tmp_path / "run.tbt.partial").exists()
    # the recorded histograms are the passive party's decrypted-equivalent bin sums
    replies = [r.message for r in records if isinstance(r.message, HistogramReply)]
    assert replies[0].sums.shape[1:] == (5, 33, 3)
    note = next(r.message for r in records if isinstance(r.message, GradientsNote))
    assert note.rows.size == note.g.size == note.h.size
    # bytes on the wire match the frames in the transcript
    assert run.traffic["messages"] == sum(1 for r in records if r.kind in (SENT, RECEIVED))


def test_failed_run_leaves_no_transcript(tmp_path, small_credit):
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    broken = replace(passives[0].take(np.arange(passives[0].n_rows - 1)), ids=None)
    with pytest.raises(DataError, match="rows are matched by position"):
        train_local(replace(active, ids=None), [broken], BoostParams(n_trees=1, max_depth=3, subsample=0.8, max_bin=32), transcript=path)
    assert not path.exists() and not (tmp_path / "run.tbt.partial").exists()
