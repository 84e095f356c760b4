"""The receipt journal: window, bound, and survival across a restart through its file."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from services.marker.journal import IntentKey, ReceiptJournal

KEY = IntentKey("/managed-ledgers/t/ns/persistent/x", 3, 42, 1)


def test_receipts_expire_after_the_window() -> None:
    """A receipt older than the retry window no longer counts."""
    now = [1_000_000]
    journal = ReceiptJournal(retry_window=timedelta(seconds=10), clock=lambda: now[0])
    journal.record(KEY.path, KEY.version, [(KEY.ledger_id, KEY.tier)], now[0])
    now[0] += 9_999
    assert journal.accepted_at(KEY) == 1_000_000
    now[0] += 1
    assert None is journal.accepted_at(KEY)


def test_bounded_to_max_entries() -> None:
    """The oldest entries go first when the journal is full."""
    journal = ReceiptJournal(retry_window=timedelta(hours=1), max_entries=2)
    keys = [IntentKey("/p", 0, i, 1) for i in range(3)]
    journal.record("/p", 0, [(i, 1) for i in range(3)], journal._clock())
    assert (len(journal), journal.accepted_at(keys[0])) == (2, None)


def test_file_survives_a_restart(tmp_path: Path) -> None:
    """A second journal on the same file knows the first one's receipts; torn lines are
    ignored."""
    file = tmp_path / "receipts.log"
    first = ReceiptJournal(retry_window=timedelta(minutes=5), file=file)
    first.open()
    first.record(KEY.path, KEY.version, [(KEY.ledger_id, KEY.tier)], first._clock())
    first.close()
    with file.open("a") as f:
        f.write("12\tbroken")
    second = ReceiptJournal(retry_window=timedelta(minutes=5), file=file)
    second.open()
    assert (len(second), second.accepted_at(KEY) is not None) == (1, True)
    second.close()


def test_forget_drops_entries() -> None:
    """Entries of a version that was written over are dropped."""
    journal = ReceiptJournal(retry_window=timedelta(minutes=1))
    journal.record(KEY.path, KEY.version, [(KEY.ledger_id, KEY.tier)], journal._clock())
    journal.forget([KEY])
    assert (journal.accepted_at(KEY), journal.knows(KEY.path, KEY.version)) == (None, False)


def test_settled_unlinked_calls_are_not_kept_in_memory() -> None:
    """Receipts of a call that unlinked its ledgers are never needed again."""
    journal = ReceiptJournal(retry_window=timedelta(minutes=1))
    handle = journal.append(KEY.path, KEY.version, [(KEY.ledger_id, KEY.tier)], journal._clock())
    journal.settle(handle, unlinked=True)
    assert None is journal.accepted_at(KEY)


def test_compaction_keeps_unsettled_calls(tmp_path: Path) -> None:
    """A call whose write is still pending survives a compaction of the file, so a crash
    right after it still finds its receipts."""
    file = tmp_path / "receipts.log"
    first = ReceiptJournal(retry_window=timedelta(minutes=5), file=file)
    first.open()
    first.append(KEY.path, KEY.version, [(KEY.ledger_id, KEY.tier)], first._clock())
    first._compact()
    first.close()
    second = ReceiptJournal(retry_window=timedelta(minutes=5), file=file)
    second.open()
    assert True is (second.accepted_at(KEY) is not None)
    second.close()
