"""``python -m headgeom``: the same command line as the ``headgeom`` entry point."""
import sys

from headgeom.cli import main

sys.exit(main())
