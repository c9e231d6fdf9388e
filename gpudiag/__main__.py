"""`python -m gpudiag`: the same command as the `gpudiag` console script."""

from gpudiag.cli import main

main()
