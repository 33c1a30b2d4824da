"""`python -m service.cli`: the same as the `medkg` console script."""

from service.cli import main

main()
