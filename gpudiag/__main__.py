"""`python -m gpudiag`: the same command as the `gpudiag` console script."""

import sys

try:  # Ctrl-C during the imports exits as Ctrl-C does later (130), without a traceback
    from gpudiag.cli import main
except KeyboardInterrupt:
    sys.exit(130)

main()
