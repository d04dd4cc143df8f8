"""``python -m dpstream.cli``: the ``dpstream`` command."""

import sys

from dpstream.cli.entry import main

sys.exit(main())
