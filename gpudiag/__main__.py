"""`python -m gpudiag`: the same command as the `gpudiag` console script."""

import signal

# Until main() takes Ctrl-C over, SIGINT ends the process as the signal does (shells report 130), instead of
# a KeyboardInterrupt traceback from whichever import it landed in.
signal.signal(signal.SIGINT, signal.SIG_DFL)

from gpudiag.cli import main  # noqa: E402

main()
