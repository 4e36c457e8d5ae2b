import sys

from composer.buildtime.cli import main

try:
    sys.exit(main())
except BrokenPipeError:  # e.g. `python -m composer … | head`
    sys.exit(0)
