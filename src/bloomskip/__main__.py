import sys

from bloomskip.cli import main

sys.exit(main())
