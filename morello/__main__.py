"""``python -m morello``: see morello.cli."""

from __future__ import annotations

import sys

from morello.cli import main

sys.exit(main())
