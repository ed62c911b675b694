"""Property-based tests of serde and a fuzz run of the decoders over the corpus in the repo.

``python -m tests.fuzz --minutes N`` runs the same oracle for longer and adds crashing inputs
to ``tests/fuzz/corpus``; here every corpus entry is replayed and mutated a few hundred times.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teeboost.errors import ProtocolError
from teeboost.transport import serde

from .fuzz.harness import check, corpus, message_strategy, mutate, seed_frames
from .fuzz.harness import message_types

CORPUS = corpus()


def test_corpus_has_a_seed_for_every_message_type():
    import subprocess
    import sys

    # every module defining messages, found from the source (not from what happens to be imported)
    root = __import__("pathlib").Path(serde.__file__).resolve().parents[1]
    defining = sorted(str(p.relative_to(root.parent)).replace("/", ".")[:-3] for p in root.rglob("*.py")
                      if "@message" in p.read_text() or "@serde.message" in p.read_text())
    script = "import " + ", ".join(defining) + "; from teeboost.transport.serde import message_types; " \
             "print(len(message_types()))"
    everything = int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                    check=True).stdout)
    assert len(message_types()) == everything, "tests/fuzz/harness.py must import every module defining messages"
    assert {f"seed-{name}.bin" for name in message_types()} <= set(CORPUS)
    for name, frame in seed_frames().items():
        assert CORPUS[f"seed-{name}.bin"] == frame, f"re-run python -m tests.fuzz --write-seeds ({name} changed)"


@pytest.mark.parametrize("name", sorted(message_types()))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_message_type_roundtrips(name, data):
    msg = data.draw(message_strategy(message_types()[name]))
    frame = serde.encode(msg)
    back = serde.decode(frame)
    assert type(back) is type(msg) and serde.encode(back) == frame


@pytest.mark.parametrize("entry", sorted(CORPUS))
def test_corpus_entry_decodes_or_is_refused(entry):
    check(CORPUS[entry])


@settings(max_examples=400, deadline=None)
@given(pick=st.integers(0, len(CORPUS) - 1), seed=st.integers(0, 2**32 - 1))
def test_mutated_frames_decode_or_are_refused(pick, seed):
    entries = list(CORPUS.values())
    check(mutate(entries[pick], np.random.default_rng(seed), entries))


@pytest.mark.parametrize("entry", sorted(e for e in CORPUS if e.startswith("seed-")))
def test_every_truncation_of_a_seed_is_refused(entry):
    frame = CORPUS[entry]
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            serde.decode(frame[:cut])
