import sys

from composer.cli import main

sys.exit(main())
