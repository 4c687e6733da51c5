"""``python -m demo`` (what ``make demo`` runs): see :mod:`demo.replication`."""

import sys

from demo.replication import main

sys.exit(main())
