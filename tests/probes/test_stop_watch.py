"""probes/stop_watch.py: the runner's watch fires when nobody reads its output any more or a stop signal comes,
and never for output that goes to a file or an fd that is not open."""
import os
import signal
import threading

from probes import stop_watch


def watched(monkeypatch, fds):
    fired = []
    done = threading.Event()

    def record(signum):
        fired.append(signum)
        done.set()

    monkeypatch.setattr(stop_watch, "end_run", record)
    return stop_watch.StopWatch(fds).start(), fired, done


def test_a_closed_reader_ends_the_run(monkeypatch):
    read_end, write_end = os.pipe()
    watch, fired, done = watched(monkeypatch, [write_end])
    try:
        assert not done.wait(0.3)      # someone reads: nothing happens
        os.close(read_end)
        assert done.wait(5) and fired == [signal.SIGKILL]
    finally:
        watch.stop()
        os.close(write_end)


def test_a_file_and_an_fd_not_open_never_end_it(monkeypatch, tmp_path):
    with open(tmp_path / "out", "w") as out:
        spare = os.dup(out.fileno())
        os.close(spare)                # a number that is not open: POLLNVAL, which says nothing
        watch, fired, done = watched(monkeypatch, [out.fileno(), spare])
        try:
            assert not done.wait(1.2) and fired == []
        finally:
            watch.stop()


def test_sigterm_ends_the_run_from_the_watch_and_the_next_one_is_the_default(monkeypatch):
    previous = signal.getsignal(signal.SIGTERM)
    watch, fired, done = watched(monkeypatch, [])
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert done.wait(5) and fired == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        watch.stop()
    assert signal.getsignal(signal.SIGTERM) is previous   # stop() puts the handler back


def test_an_ignored_hangup_stays_ignored(monkeypatch):
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)   # as nohup leaves it
    try:
        watch, fired, done = watched(monkeypatch, [])
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)
        assert not done.wait(0.5) and fired == []
        watch.stop()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_the_end_of_a_held_stdin_ends_the_run_and_stray_bytes_do_not(monkeypatch):
    read_end, write_end = os.pipe()
    watch = stop_watch.StopWatch([], read_end)
    fired, done = [], threading.Event()
    monkeypatch.setattr(stop_watch, "end_run", lambda signum: (fired.append(signum), done.set()))
    watch.start()
    try:
        os.write(write_end, b"stray\n")
        assert not done.wait(0.6)      # read and dropped: the control side still holds it
        os.close(write_end)
        assert done.wait(5) and fired == [signal.SIGKILL]
    finally:
        watch.stop()
        os.close(read_end)


def test_detach_stdin_keeps_a_pipe_for_the_watch_and_gives_fd0_devnull(tmp_path):
    saved = os.dup(0)
    read_end, write_end = os.pipe()
    try:
        os.dup2(read_end, 0)
        private = stop_watch.detach_stdin()
        assert private is not None and not os.get_inheritable(private)
        assert os.read(0, 10) == b""                   # children and probes read an empty stdin, as before
        os.write(write_end, b"x")
        assert os.read(private, 10) == b"x"
        os.close(private)
        with open(tmp_path / "f", "w") as fh:          # a file on stdin is never watched
            os.dup2(fh.fileno(), 0)
            assert stop_watch.detach_stdin() is None
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
