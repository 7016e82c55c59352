"""Ctrl-C during a long call: the library is asked to cancel, the call ends
within a few seconds with KeyboardInterrupt, and no output is left."""

import os
import pathlib
import signal
import threading
import time

import pytest

import optstate

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def python_handles_sigint():
    # Python installs its KeyboardInterrupt handler only when SIGINT was not
    # ignored at start, and a shell starts background jobs with it ignored:
    # these tests need the handler a terminal's Python has, whoever started them.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def interrupt_after(seconds):
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_keyboard_interrupt_stops_a_long_write_and_leaves_nothing(tmp_path):
    out = tmp_path / "big.pt"
    timer = interrupt_after(0.5)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            # 8 GiB of AdamW state: tens of seconds of work if nothing stopped it
            optstate.run(["regenerate", "--synthetic", "8GiB", "--no-sync", "-q", "-o", str(out)])
    finally:
        timer.cancel()
    assert time.monotonic() - started < 3
    assert list(tmp_path.iterdir()) == []


def test_the_next_call_runs_normally_after_an_interrupt(tmp_path):
    timer = interrupt_after(0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            optstate.run(["regenerate", "--synthetic", "8GiB", "--no-sync", "-q", "-o", str(tmp_path / "a.pt")])
    finally:
        timer.cancel()
    doc = optstate.inspect(REPO / "testdata/good/torch113/adamw_index.pt")
    assert doc["format"]
