import sys

from mlaprof.cli import main

sys.exit(main())
