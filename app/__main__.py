"""``python -m dptop``: the same as the ``dptop`` command."""
from dptop.entry import main

raise SystemExit(main())
