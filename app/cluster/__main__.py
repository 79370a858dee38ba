"""``python -m dptop.cluster agent|collect`` (the same commands dptop's CLI adds)."""
import sys

from dptop.cluster.cli import main

sys.exit(main())
