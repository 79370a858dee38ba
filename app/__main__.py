"""``python -m dptop``: the same as the ``dptop`` command."""
from dptop.cli import main

raise SystemExit(main())
